"""A turn's exchange bookkeeping costs the same in a long chat as in a short one (migration 0010).

Each turn the exchange summarizer reads the finished exchange's records, and the store folds the
close and summary records to their exchange. These used to read every message or every exchange of
the chat (~50 ms at 100k messages, on the database thread every accept waits for). The cost is
counted in SQLite virtual-machine instructions (apsw's progress handler), which do not depend on the
machine or its load, on a database without the planner's statistics, as a new home runs until its
first close.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.log_records import exchange_summary_record

CHAT = ChatRef("console", "me")
OTHER = ChatRef("telegram", "42")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEP = 10  # the progress handler is called every STEP instructions


def exchange_records(chat: ChatRef, n: int, at: datetime) -> list[MessageRecord]:
    """One finished turn: the person's message, the exchange opened, the reply, the exchange closed."""
    user = MessageRecord(chat, Role.USER, f"question {n} about the garden", created_at=at)
    opened = exchange_open_record(chat, user.id, at + timedelta(milliseconds=1))
    reply = MessageRecord(chat, Role.ASSISTANT, f"answer {n}", created_at=at + timedelta(milliseconds=2))
    closed = exchange_close_record(opened, ExchangeStatus.COMPLETED, reply.id, at + timedelta(milliseconds=3))
    return [user, opened, reply, closed]


async def bookkeeping_steps(tmp_path: Path, history: int) -> int:
    """Instructions SQLite runs for the bookkeeping of one turn after `history` earlier turns (and as
    many plain messages, as a chat kept before exchanges were logged), another chat alongside."""
    store = await SqliteStore.open(tmp_path / f"klaw-{history}.db")
    try:
        earlier: list[MessageRecord] = []
        for n in range(history):
            at = T0 + timedelta(seconds=n)
            earlier.append(MessageRecord(CHAT, Role.USER, f"note {n}", created_at=at))
            earlier += exchange_records(CHAT, n, at + timedelta(milliseconds=10))
            earlier += exchange_records(OTHER, n, at + timedelta(milliseconds=20))
        await store.messages.append_many(earlier)
        user, opened, reply, closed = exchange_records(CHAT, history, T0 + timedelta(days=1))
        for record in (user, opened, reply):
            await store.messages.append(record)

        steps = 0

        def count() -> bool:
            nonlocal steps
            steps += STEP
            return False

        def watch(connection: apsw.Connection) -> None:
            connection.set_progress_handler(count, STEP)

        await store.db.run(watch)
        await store.messages.append(closed)  # the close folded to its exchange
        latest = await store.history.latest_exchange_id(CHAT)
        assert latest is not None
        records = await store.history.exchange_messages(latest)  # what the summarizer reads
        assert records is not None and [m.record.id for m in records] == [r.id for r in (user, opened, reply, closed)]
        summary = exchange_summary_record(
            CHAT,
            "They asked about the garden.",
            exchange=opened.id,
            sources=[m.record.id for m in records],
            model="fake",
            at=T0 + timedelta(days=1, seconds=1),
        )
        assert await store.summaries.foldable(summary)  # the summary log's check before appending
        await store.messages.append(summary)  # folded: its exchange found, its sources checked
        assert (saved := await store.summaries.exchange_summary(latest)) is not None and saved.record_id == summary.id
        return steps
    finally:
        await store.aclose()


async def test_a_turns_bookkeeping_does_not_grow_with_the_chat(tmp_path: Path) -> None:
    short = await bookkeeping_steps(tmp_path, 10)
    long = await bookkeeping_steps(tmp_path, 500)  # 50 times the history
    # A deeper b-tree costs a few more instructions per lookup; reading the chat cost ~20 times more.
    assert long < 1.5 * short, (short, long)
