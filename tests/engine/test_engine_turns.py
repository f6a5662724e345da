"""End-to-end turns through the whole engine (docs/decisions/009-carried-over-requirements.md:
MessageProcessorIntegrationTest, ToolCallLoopTest, ContextBuilderTest, SessionManagerTest,
CommandHandlerTest) over real HTTP and a real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from klaw.store.records import ChatRef, MessageType
from tests.engine.harness import CHAT, running_engine


async def test_simple_message_processed_end_to_end(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        reply = await h.turn("hello there")
        assert reply.text == "echo: hello there"
        assert reply.chat == CHAT
        assert reply.kind == "reply"
        body = h.server.chat_requests[-1].body
        assert body["model"] == "small"  # provider name = id without "fake/"
        stored = await h.engine.chats.history(CHAT)
        assert [(m.role, m.text) for m in stored] == [("user", "hello there"), ("assistant", "echo: hello there")]
        turns = await h.engine.chats.turns(CHAT)
        assert [(t.status, t.message, t.reply) for t in turns] == [("completed", stored[0].id, stored[1].id)]


async def test_debounced_messages_are_joined_into_one_turn(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.say("first")
        await h.clock.advance(1.0)
        await h.say("second")
        await h.clock.advance(1.5)
        await h.wait_for_replies(1)
        assert len(h.server.chat_requests) == 1
        assert h.last_request_messages()[-1] == {"role": "user", "content": "first\nsecond"}


async def test_context_has_system_prompt_core_memory_and_window(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.home.core_memory_file.write_text(json.dumps({"name": "Ada"}), encoding="utf-8")
        await h.turn("one")
        await h.turn("two")
        messages = h.last_request_messages()
        assert messages[0]["role"] == "system" and "Soul" in messages[0]["content"]
        assert messages[1]["role"] == "system" and '"name": "Ada"' in messages[1]["content"]
        assert [m["content"] for m in messages[2:]] == ["one", "echo: one", "two"]
        names = [layer.name for layer in h.engine.processor.last_context[CHAT].layers]
        assert names == ["system_prompt", "core_memory", "sliding_window", "tools", "pending"]


async def test_window_only_shows_the_current_segment_after_new(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("old topic")
        notice = await h.engine.submit(CHAT, "/new")
        assert notice.command_reply is not None and "new conversation" in notice.command_reply.lower()
        await h.turn("new topic")
        contents = [m["content"] for m in h.last_request_messages() if m["role"] != "system"]
        assert contents == ["new topic"]
        log_files = list((h.home.conversations / CHAT.log_dir_name).glob("*.jsonl"))
        lines = [json.loads(line) for f in log_files for line in f.read_text(encoding="utf-8").splitlines()]
        assert [line["type"] for line in lines].count(MessageType.SESSION_BREAK.value) == 1


async def test_sliding_window_respects_size_and_budget(tmp_path: Path) -> None:
    async with running_engine(tmp_path, context={"slidingWindow": 4}) as h:
        for i in range(4):
            await h.turn(f"message {i}")
        window = [m for m in h.last_request_messages() if m["role"] != "system"]
        assert len(window) == 4 + 1  # four from the window plus the pending message
        assert window[-1]["content"] == "message 3"
    # The tools are a fixed layer too (every default group: ~1,860 tokens); this engine offers one group so
    # the window has room to be measured against the budget.
    async with running_engine(tmp_path / "tight", models={}, tools={"enabled": ["clock"]}) as h:
        long_text = "word " * 600  # ~750 tokens a message; the 3600-token budget holds only a few
        for _ in range(6):
            await h.turn(long_text)
        context = h.engine.processor.last_context[CHAT]
        assert context.budget == 3600  # 90 % of contextBudget 4000
        assert context.total_tokens <= context.budget
        window_layer = next(layer for layer in context.layers if layer.name == "sliding_window")
        assert 0 < window_layer.items < 10


async def test_single_tool_call_is_executed_and_its_result_sent_back(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("current_time", {"timezone": "UTC"})])
        h.server.reply_text("It is morning.")
        reply = await h.turn("what time is it?")
        assert reply.text == "It is morning."
        second = h.last_request_messages()
        assert second[-2]["role"] == "assistant" and second[-2]["tool_calls"][0]["function"]["name"] == "current_time"
        assert second[-1]["role"] == "tool" and "2026-01-01T09:00" in second[-1]["content"]
        types = [m.type for m in await h.engine.chats.history(CHAT)]
        assert types == ["text", "tool_call", "tool_result", "text"]


async def test_multiple_rounds_and_bad_arguments_become_tool_errors(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("current_time", {"timezone": "Mars/Olympus"})])
        h.server.reply_tool_calls([("no_such_tool", {})])
        h.server.reply_text("done")
        reply = await h.turn("go")
        assert reply.text == "done"
        tool_messages = [m for m in h.last_request_messages() if m["role"] == "tool"]
        assert len(tool_messages) == 2
        assert "Mars/Olympus" in tool_messages[0]["content"]
        assert "no_such_tool" in tool_messages[1]["content"]


async def test_tool_round_limit_gives_a_clear_message_and_closes_the_exchange(tmp_path: Path) -> None:
    async with running_engine(tmp_path, processing={"maxToolCallRounds": 3}) as h:
        for _ in range(5):
            h.server.reply_tool_calls([("current_time", {})])
        reply = await h.turn("loop forever")
        assert "3 rounds" in reply.text and "maxToolCallRounds" in reply.text
        assert len(h.server.chat_requests) == 3
        assert (await h.engine.chats.turns(CHAT))[-1].status == "tool_limit"


async def test_llm_failure_tells_the_person_and_marks_the_exchange_failed(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_error(500, message="boom")
        reply = await h.turn("hi")
        assert reply.kind == "error"
        assert "could not answer" in reply.text
        assert (await h.engine.chats.turns(CHAT))[-1].status == "failed"
        ok = await h.turn("again")  # the engine keeps serving
        assert ok.text == "echo: again"


async def test_a_rate_limited_model_is_retried_on_the_engine_clock(tmp_path: Path) -> None:
    # The server asks for 25 s: the chat client waits them on the engine's clock, which only this test
    # moves (a real 25 s wait would outlast every timeout here).
    patient = {"fake/patient": {"contextBudget": 4000, "maxRetries": 1}}
    async with running_engine(tmp_path, models=patient, routing={"default": "fake/patient"}) as h:
        h.server.reply_error(429, message="slow down", retry_after=25)
        await h.say("hi")
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        async with asyncio.timeout(10):
            await h.clock.wait_for_sleeper(25)
        assert h.delivered == [] and len(h.server.chat_requests) == 1
        await h.clock.advance(25)
        await h.wait_for_replies(1)
        assert h.delivered[0].text == "echo: hi"
        assert len(h.server.chat_requests) == 2


async def test_chats_are_processed_independently(tmp_path: Path) -> None:
    other = ChatRef("telegram", "7")
    async with running_engine(tmp_path) as h:
        await h.say("from me")
        await h.say("from telegram", other)
        await h.clock.advance(1.5)
        await h.wait_for_replies(2)
        assert sorted((o.chat.channel, o.text) for o in h.delivered) == [
            ("console", "echo: from me"),
            ("telegram", "echo: from telegram"),
        ]
