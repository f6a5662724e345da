"""A chat's turn alone in the engine reads its small reads on the event loop (decision 533); a turn beside
another chat's turn sends every read to the read threads. Real engine, fake model over HTTP, a real klaw.db:
the first turns measure the reads, the next one alone takes the loop's path (`inline_reads` grows during it),
then a second chat's turn while the first chat's is held in the model takes none, and both are answered."""

from __future__ import annotations

from pathlib import Path

from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_alone_signal import _held_turn

OTHER = ChatRef("console", "other")


async def test_a_lone_turn_reads_on_the_loop_and_a_turn_beside_another_does_not(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        store = h.engine.store
        assert isinstance(store, SqliteStore)
        for text in ("tea in the garden", "the garden gate", "orchids bloom"):
            await h.turn(text, OTHER)  # the other chat's reads measured
            await h.turn(text)
        before = store.db.inline_reads
        reply = await h.turn("what about the garden?")
        assert reply.text == "echo: what about the garden?"
        assert store.db.inline_reads > before  # alone: its window read (at least) on the loop

        first = await _held_turn(h, "a question held in the model", CHAT)
        held_at = store.db.inline_reads
        second = await _held_turn(h, "the garden again, from the other chat", OTHER)
        assert store.db.inline_reads == held_at  # two turns in flight: the other chat's reads went to the threads
        first.set()
        second.set()
        await h.wait_for_replies(len(h.delivered) + 2)
        texts = sorted(outbound.text for outbound in h.delivered[-2:])
        assert texts == ["answer to a question held in the model", "answer to the garden again, from the other chat"]
