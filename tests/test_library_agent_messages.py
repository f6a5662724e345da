"""What the agent sends on its own reaches a library program: a subagent's answer, which no `ask`
returns, is given to `Klaw(on_message=...)` (decision 234)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, AgentMessage, ChatMessage, ChatRef, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
INSTRUCTION = "count the apples in the orchard"


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str | ChatResponse:
    """The chat's turn starts a subagent and says so; the subagent's run answers its instruction."""
    last = messages[-1]
    if last.role == "tool":
        return "I started a run; its answer will arrive in this chat."
    if last.content == INSTRUCTION:
        return "there are 12 apples"
    return tool_calls(call_tool("subagent_spawn", {"task_name": "apples", "message": INSTRUCTION}))


async def test_a_subagents_answer_reaches_on_message(tmp_path: Path) -> None:
    received: asyncio.Queue[AgentMessage] = asyncio.Queue()

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), on_message=received.put) as agent:
        reply = await agent.ask("alice", "how many apples are there?")
        assert reply == "I started a run; its answer will arrive in this chat."
        message = await asyncio.wait_for(received.get(), 30)
        assert message == AgentMessage(ChatRef("library", "alice"), "there are 12 apples", "reply", "apples")
        assert received.empty()  # the turn's own reply went to `ask`, not to on_message
        assert (await agent.history("alice"))[-1].text == "there are 12 apples"


async def test_a_failing_on_message_leaves_the_engine_serving(tmp_path: Path) -> None:
    told: list[str] = []

    async def on_message(message: AgentMessage) -> None:
        told.append(message.text)
        raise RuntimeError("a bug in the program's callback")

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), on_message=on_message) as agent:
        await agent.ask("alice", "how many apples are there?")
        for _ in range(300):
            if told:
                break
            await asyncio.sleep(0.1)
        assert told == ["there are 12 apples"]
        assert await agent.ask("alice", "and now?") == "I started a run; its answer will arrive in this chat."


async def test_agent_info_says_what_each_call_is_for(tmp_path: Path) -> None:
    """One FunctionModel answers turns, subagent runs and the summarizer; `AgentInfo.purpose` tells them apart."""
    purposes: list[str] = []

    def answering(messages: Sequence[ChatMessage], info: AgentInfo) -> str | ChatResponse:
        purposes.append(info.purpose)
        if info.purpose == "summary":
            return "1. the person asked about apples"
        return model(messages, info)

    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"batchExchanges": 1}}  # summarized at once
    received: asyncio.Queue[AgentMessage] = asyncio.Queue()
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(answering), on_message=received.put) as agent:
        await agent.ask("alice", "how many apples are there?")
        await asyncio.wait_for(received.get(), 30)
        for _ in range(300):
            if "summary" in purposes:
                break
            await asyncio.sleep(0.1)
    # the subagent's run starts while the turn goes on, so its call may come before the turn's second
    assert purposes[0] == "turn" and purposes.count("turn") == 2
    assert "subagent" in purposes and "summary" in purposes


CUT_OFF_PROGRAM = """
import asyncio, os, sys
from klaw import ChatRef, FunctionModel, Klaw

async def main() -> None:
    chat = ChatRef(sys.argv[2], sys.argv[3])
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    model = FunctionModel(lambda messages, info: "the answer the crash hid")
    agent = await Klaw(sys.argv[1], config=config if sys.argv[2] == "library" else None, model=model).start()
    await agent.ask(chat, "a question")
    os._exit(0)  # gone before the engine noted the reply as shown: as after kill -9 at that moment

asyncio.run(main())
"""


def cut_off_after_the_reply(home: Path, chat: ChatRef, env: dict[str, str] | None = None) -> None:
    """A program that gets its reply and dies before the engine writes it down as shown."""
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", CUT_OFF_PROGRAM, str(home), chat.channel, chat.chat_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or dict(os.environ),
    )
    assert result.returncode == 0, result.stderr


async def test_a_reply_a_crash_left_unshown_reaches_on_message_at_the_next_start(tmp_path: Path) -> None:
    """The engine sends such a reply again at start (decision 101); the library's channel is registered
    before that, so the program is told, once."""
    home = tmp_path / "home"
    cut_off_after_the_reply(home, ChatRef("library", "alice"))
    received: asyncio.Queue[AgentMessage] = asyncio.Queue()
    async with Klaw(home, config=CONFIG, model=FunctionModel(model), on_message=received.put):
        message = await asyncio.wait_for(received.get(), 30)
        assert message == AgentMessage(ChatRef("library", "alice"), "the answer the crash hid", "reply", None)
    async with Klaw(home, config=CONFIG, model=FunctionModel(model), on_message=received.put) as agent:
        await agent.ask("alice", "how many apples are there?")  # a turn: the start's redelivery is long done
        assert received.empty()  # shown once: the first start confirmed it


async def test_message_send_to_another_library_chat_once_it_is_a_target(tmp_path: Path) -> None:
    """newcomer10: a program's own chats are not `message_send` targets by default; docs/library.md says
    how to allow them (`tools.messageTargets`), and then bob's chat gets what alice's turn sent."""

    def sending(messages: Sequence[ChatMessage], info: AgentInfo) -> str | ChatResponse:
        if messages[-1].role == "tool":
            return str(messages[-1].content)
        return tool_calls(call_tool("message_send", {"target": "library:bob", "text": "lunch at noon"}))

    received: asyncio.Queue[AgentMessage] = asyncio.Queue()
    config = {**CONFIG, "tools": {"messageTargets": ["library:alice", "library:bob"]}}
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(sending), on_message=received.put) as agent:
        assert await agent.ask("alice", "tell bob") == "Sent to library:bob."
        message = await asyncio.wait_for(received.get(), 30)
        assert (message.chat, message.text, message.sent_from) == (
            ChatRef("library", "bob"),
            "lunch at noon",
            "library:alice",
        )
