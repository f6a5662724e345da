"""The reads every turn repeats are answered from memory until a table they come from is written
(store/sqlite/read_cache.py, docs/decisions/197-turn-read-cache.md): a chat's session and current
segment, its segment's summary, whether it has past segments. A repeated read runs no statement on
the database, a turn's messages and its exchange summary (written after almost every turn) leave
them kept, and after each kind of write that changes them (`/new`, `/model`, a segment summary
rolled or made final, a delete in plain SQL) the next read gives what a fresh read gives."""

from __future__ import annotations

from typing import Any

import apsw

from klaw.store.records import MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore
from tests.memory.summary_helpers import ALICE, T0, Turns


class Statements:
    """Counts the statements the store's connection runs (its exec trace), to tell a kept read."""

    def __init__(self) -> None:
        self.count = 0
        self.sql: list[str] = []

    def __call__(self, _cursor: apsw.Cursor, sql: str, _bindings: Any) -> bool:
        self.count += 1
        self.sql.append(sql)
        return True


async def reads(store: SqliteStore) -> tuple[Any, ...]:
    segment = await store.segments.current(ALICE)
    return (
        segment,
        await store.sessions.get(ALICE),
        await store.summaries.segment_summary(segment.id),
        await store.summaries.has_past_segments(ALICE, exclude_segment_id=segment.id),
    )


async def kept_and_fresh(store: SqliteStore, statements: Statements) -> tuple[Any, ...]:
    """The reads twice: the second runs no statement and gives the same values."""
    first = await reads(store)
    before = statements.count
    again = await reads(store)
    assert statements.count == before, "a repeated read went to the database"
    assert again == first
    return first


async def test_repeated_reads_are_kept_and_every_write_is_seen(store: SqliteStore) -> None:
    statements = Statements()
    await store.db.run(lambda connection: setattr(connection, "exec_trace", statements))
    turns = Turns(store)
    tea = await turns.turn("green tea?", "80 degrees")
    segment, session, summary, past = await kept_and_fresh(store, statements)
    assert (segment.id, session, summary, past) == (tea.segment_id, None, None, False)

    await store.messages.append(
        MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.MODEL_SWITCH, metadata={"model": "m2"}, created_at=T0)
    )  # /model
    _, session, _, _ = await kept_and_fresh(store, statements)
    assert session is not None and session.model == "m2"

    kept = await reads(store)
    await turns.turn("and black tea?", "95 degrees")  # messages update their segment's count (migration 0006)
    before = statements.count
    assert await reads(store) == kept and statements.count == before
    before = statements.count
    saved = await store.summaries.save_exchange_summary(tea, "Tea at 80 degrees.", "m", T0)  # after every turn
    assert saved is not None and statements.count > before
    before = statements.count
    assert await reads(store) == kept and statements.count == before  # a turn reads segment summaries only

    rolled = await store.summaries.save_segment_summary(
        tea.segment_id, "Tea.", "m", final=False, covers_exchange_id=tea.id, exchanges_covered=1, at=T0
    )
    _, _, summary, _ = await kept_and_fresh(store, statements)
    assert rolled is not None and summary == rolled
    final = await store.summaries.mark_final(rolled.id, T0)
    _, _, summary, _ = await kept_and_fresh(store, statements)
    assert final is not None and summary == final and summary.final

    new_segment = await turns.new_segment()  # /new: the chat's next segment, the old one now past
    segment, _, summary, past = await kept_and_fresh(store, statements)
    assert (segment.id, summary, past) == (new_segment, None, True)

    await store.db.run(lambda c: c.execute("DELETE FROM summaries WHERE id = ?", (rolled.id,)))  # any writer
    *_, past = await kept_and_fresh(store, statements)
    assert past is False
