"""Text klaw takes in from outside the person — a model's answer and its tool calls' arguments, a tool's
result — holding a lone surrogate (a `\\ud800` JSON escape: an emoji a server cut in half) becomes
U+FFFD, and the turn goes on. Before, the turn failed ("Sorry, something went wrong", a traceback in
the engine log: UnicodeEncodeError storing the reply in SQLite), and `memory_save` with such text
gave the model "UnicodeEncodeError: 'utf-8' codec can't encode …". Real engine, fake OpenAI server
over real HTTP (the answers written as the raw JSON a server sends), SearXNG served on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine.harness import CHAT, running_engine
from tests.tools.web.pages import searxng_routes, serving

REPLACEMENT = "\ufffd"


def completion(message: dict[str, object]) -> str:
    """A chat completion as a server writes it, the lone surrogate kept as the JSON escape `\\ud800`
    (`json.dumps` escapes it so: valid JSON, not valid text once decoded)."""
    body = {"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": message}]}
    text = json.dumps(body)
    assert "\\ud800" in text or "\\ud83d" in text
    return text


def log_text(home_logs: Path) -> str:
    """Every conversation-log line of the home, read as strict UTF-8 (a lone surrogate could not be)."""
    return "".join(path.read_bytes().decode("utf-8") for path in sorted(home_logs.rglob("*.jsonl")))


async def test_a_reply_and_tool_arguments_with_a_lone_surrogate_become_u_fffd_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    async with running_engine(tmp_path) as h:
        arguments = json.dumps({"text": "my locker is 4417 \ud83d"})  # the escape inside the arguments' JSON
        call = {"id": "c1", "type": "function", "function": {"name": "memory_save", "arguments": arguments}}
        h.server.reply_raw(completion({"role": "assistant", "content": None, "tool_calls": [call]}))
        h.server.reply_raw(completion({"role": "assistant", "content": "Saved \ud800 it"}))
        reply = await h.turn("remember my locker is 4417")
        assert reply.kind != "error"
        assert reply.text == f"Saved {REPLACEMENT} it"
        result = h.last_request_messages()[-1]
        assert result["role"] == "tool" and result["content"].startswith("Saved as memory")
        saved = await h.engine.chats.saved_memories(CHAT, "locker")
        assert [m.text for m in saved] == [f"my locker is 4417 {REPLACEMENT}"]
        logged = log_text(h.home.conversations)
        assert f"Saved {REPLACEMENT} it" in logged and f"4417 {REPLACEMENT}" in logged
        h.server.reply_text("still here")
        assert (await h.turn("are you there?")).text == "still here"  # the chat goes on
        assert [t.status for t in await h.engine.chats.turns(CHAT)] == ["completed", "completed"]


async def test_a_search_result_with_a_lone_surrogate_reaches_the_model_as_u_fffd(tmp_path: Path) -> None:
    found = [{"title": "Half \ud83d emoji", "url": "https://weather.example/lisbon", "content": "Sunny."}]
    with serving(searxng_routes(found)) as searxng:  # json.dumps writes it as the escape `\ud83d`
        search = {"search": {"provider": "searxng", "url": searxng.url("")}}
        async with running_engine(tmp_path, web=search) as h:
            h.server.reply_tool_calls([("web_search", {"query": "lisbon weather"})])
            h.server.reply_text("Sunny.")
            reply = await h.turn("weather in lisbon?")
            assert reply.kind != "error" and reply.text == "Sunny."
            result = h.last_request_messages()[-1]["content"]
            assert f"1. Half {REPLACEMENT} emoji" in result
            assert f"Half {REPLACEMENT} emoji" in log_text(h.home.conversations)
