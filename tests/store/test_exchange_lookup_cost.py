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
from klaw.store.summaries.log_records import exchange_summary_record, segment_summary_record
from klaw.store.summaries.records import SummaryKind

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


async def summary_append_steps(tmp_path: Path, history: int) -> int:
    """Instructions SQLite runs to append one exchange summary record and read back the summary its fold
    stored (`append_record`, the summary log's path), after `history` summarized exchanges in the same
    segment, and then a rolling segment summary's."""
    store = await SqliteStore.open(tmp_path / f"summaries-{history}.db")
    try:
        earlier: list[MessageRecord] = []
        for n in range(history + 1):
            turn = exchange_records(CHAT, n, T0 + timedelta(seconds=n))
            earlier += turn
            if n < history:  # every earlier exchange summarized, as the summarizer leaves a chat
                written = T0 + timedelta(seconds=n, milliseconds=500)
                earlier.append(
                    exchange_summary_record(
                        CHAT, f"summary {n}", exchange=turn[1].id, sources=(), model="fake", at=written
                    )
                )
        await store.messages.append_many(earlier)
        user, opened, reply, _closed = earlier[-4:]
        at, sources = T0 + timedelta(days=1), [user.id, reply.id]
        summary = exchange_summary_record(CHAT, "The garden.", exchange=opened.id, sources=sources, model="fake", at=at)
        rolling = segment_summary_record(
            CHAT,
            "The garden, all along.",
            covers=opened.id,
            final=False,
            exchanges_covered=history + 1,
            sources=[summary.id],
            model="fake",
            at=at,
        )

        steps = 0

        def count() -> bool:
            nonlocal steps
            steps += STEP
            return False

        await store.db.run(lambda connection: connection.set_progress_handler(count, STEP))
        _, stored = await store.summaries.append_record(summary)
        _, rolled = await store.summaries.append_record(rolling)
        assert stored is not None and (stored.kind, stored.text, stored.record_id) == (
            SummaryKind.EXCHANGE,
            summary.content,
            summary.id,
        )
        assert rolled is not None and (rolled.kind, rolled.text, rolled.record_id) == (
            SummaryKind.SEGMENT,
            rolling.content,
            rolling.id,
        )
        return steps
    finally:
        await store.aclose()


async def test_a_summary_appended_is_read_back_without_its_segments_other_summaries(tmp_path: Path) -> None:
    # The fold's summary was looked for among every summary of its segment (one an exchange): ~16 ms of the
    # database thread a summary at 100k stored messages, in the turn bench's chat (decision 459).
    short = await summary_append_steps(tmp_path, 10)
    long = await summary_append_steps(tmp_path, 200)
    assert long < 1.5 * short, (short, long)
