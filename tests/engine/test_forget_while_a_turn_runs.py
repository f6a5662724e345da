"""`/forget last` sent while the chat's turn is under way (decision 219): the turn is stopped first, then
the whole exchange goes, with the memory its memory_save call wrote, and nothing of it is written after.
FakeOpenAiServer asks for memory_save, and holds the model's answer (before or after that call) until
the test lets it go. tests/engine/test_postgres_engine.py runs `forget_during_the_turn` on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from klaw.engine.stopped_turns import ERASED
from klaw.memory.reindex import reindex
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, Harness, engine_config, running_engine
from tests.engine.test_memory_tools_turns import command
from tests.memory.archive_helpers import database_bytes, log_text

SECRET = "FORGETME2-SECRET"
HANGS = ["after memory_save", "before memory_save"]


async def forget_during_the_turn(h: Harness, hangs: str) -> None:
    """The scenario and what the person sees: the secret is in no log file, no reply, `/memory`, saved
    memory search, history nor the next turn's context. The database's bytes are the caller's to check."""
    asked, released = asyncio.Event(), asyncio.Event()

    async def hang() -> None:
        asked.set()
        await released.wait()

    await h.turn("the weather is nice today, a good day for a walk")
    if hangs == "after memory_save":  # the memory is saved before /forget, the model then hangs
        h.server.reply_tool_calls([("memory_save", {"text": f"{SECRET} saved fact"})])
        h.server.reply_text(f"Saved {SECRET} for you.", before=hang)
    else:  # the model hangs, then asks for memory_save: the adversarial run's order
        h.server.reply_tool_calls([("memory_save", {"text": f"{SECRET} saved fact"})], before=hang)
    replies = len(h.delivered)
    await h.say(f"please remember {SECRET} saved fact")
    await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
    await asyncio.wait_for(asked.wait(), 30)
    assert any(SECRET in m.text for m in await h.engine.chats.history(CHAT))

    answer = await command(h, "/forget last")

    released.set()  # the model answers now
    await h.wait_for_replies(replies + 1)
    await h.engine.embedding_queue.wait_idle()
    assert SECRET not in log_text(h.home)  # the log files (PostgreSQL keeps the log in its database)
    assert all(SECRET not in outbound.text for outbound in h.delivered[replies:])
    assert SECRET not in await command(h, "/memory")
    assert await h.engine.chats.saved_memories(CHAT, "saved fact") == []
    kept = [m.text for m in await h.engine.chats.history(CHAT)]
    assert "the weather is nice today, a good day for a walk" in kept
    assert all(SECRET not in text for text in kept)
    assert h.engine.processor.turns_under_way == 0
    assert answer.startswith("Stopped the turn under way in this chat, then forgot exchange ")
    assert ("1 saved memory" in answer) == (hangs == "after memory_save")
    stopped = h.delivered[replies]
    assert (stopped.kind, stopped.text) == ("error", ERASED)
    # the chat goes on: the next message is answered, and its context holds nothing of the secret
    reply = await h.turn("what did I ask you to remember?")
    assert reply.text == "echo: what did I ask you to remember?"
    assert SECRET not in json.dumps(h.last_request_messages())


def assert_nowhere_on_disk(h: Harness) -> None:
    assert SECRET not in log_text(h.home)
    assert SECRET.encode() not in database_bytes(h.home.database_file("klaw.db"))


@pytest.mark.parametrize("hangs", HANGS)
async def test_forget_last_while_the_turn_runs_stops_it_and_erases_what_its_tools_saved(
    tmp_path: Path, hangs: str
) -> None:
    async with running_engine(tmp_path) as h:
        await forget_during_the_turn(h, hangs)
        assert_nowhere_on_disk(h)
    assert_nowhere_on_disk(h)
    await reindex(h.home, engine_config("http://127.0.0.1:1"))
    store = await SqliteStore.open(h.home.database_file("klaw.db"))
    try:
        assert await store.memory_chunks.count(CHAT) == 0
        assert await store.search.full_text(CHAT, SECRET, limit=5) == []
    finally:
        await store.aclose()
    assert_nowhere_on_disk(h)
