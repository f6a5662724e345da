"""A turn a crash cut off whose message is too old to answer again (klaw down for more than the hour
resuming waits) is closed as interrupted at its chat's next turn, not left `open` for ever; its message is
still not answered by itself, and forgetting keeps each exchange's own messages (decision 325).

The engine starts on what a previous run left (a message two hours old, its exchange never closed). Before,
`klaw memory list` (here `Klaw.turns`) showed that exchange `open` for ever."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from klaw.store.exchange_records import exchange_open_record
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_resume_after_crash import NOW, said, stored_before_start
from tests.engine.test_stable_exchange_ids import command

OLD = "what was the score two hours ago"
NEW = "good morning again"


async def stored_cut_off_two_hours_ago(tmp_path: Path) -> None:
    asked = said(OLD, 120)
    await stored_before_start(tmp_path, [asked, exchange_open_record(CHAT, asked.id, NOW - timedelta(minutes=120), 1)])


async def test_a_too_old_cut_off_turn_is_closed_as_interrupted_and_not_answered(tmp_path: Path) -> None:
    await stored_cut_off_two_hours_ago(tmp_path)
    async with running_engine(tmp_path) as h:
        reply = await h.turn(NEW)
        assert reply.text == f"echo: {NEW}"  # the new message is answered, not the old one
        turns = [(t.id, t.status) for t in await h.engine.chats.turns(CHAT)]
        assert turns == [(1, "interrupted"), (2, "completed")], turns
        assert [m.text for m in await h.engine.chats.history(CHAT)] == [OLD, NEW, f"echo: {NEW}"]
        assert [r.body["messages"][-1]["content"] for r in h.server.chat_requests] == [NEW]


async def test_forgetting_the_next_exchange_leaves_the_too_old_one_and_its_message(tmp_path: Path) -> None:
    await stored_cut_off_two_hours_ago(tmp_path)
    async with running_engine(tmp_path) as h:
        await h.turn(NEW)
        said_now = await command(h, "/forget exchange 2")
        assert said_now.startswith("Forgot exchange 2") and "exchange 1" not in said_now, said_now
        assert [(t.id, t.status) for t in await h.engine.chats.turns(CHAT)] == [(1, "interrupted")]
        said_now = await command(h, "/forget exchange 1")
        assert said_now.startswith("Forgot exchange 1") and "answered them again" not in said_now, said_now
        assert [m.text for m in await h.engine.chats.history(CHAT)] == []
