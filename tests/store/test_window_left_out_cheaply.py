"""A turn's window is left out of the full-text ranking without probing its set for every match
(decision 484): the same rows and scores, and SQLite's work for the exclusion grows with the matches in
the window's rowid range, not with every match of the question's words.

The cost is counted in SQLite virtual-machine instructions (apsw's progress handler), which do not depend
on the machine or its load.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite import full_text
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "alice")
STEP = 10  # the progress handler is called every STEP instructions
MATCHES = 1500


async def test_left_out_rowids_at_the_ends_of_their_range_and_between(store: SqliteStore) -> None:
    """The exclusion's smallest and largest rowids are matches themselves, and matches between them that
    are not excluded stay: the range test must neither keep the ends nor drop what lies between."""
    stored = await store.messages.append_many(
        [MessageRecord(CHAT, Role.USER, f"garden {'tomato ' * (i % 5)}note {i}") for i in range(60)]
    )
    everything = await store.search.full_text(CHAT, "garden tomato", limit=60)
    for left_out in (
        {stored[10].rowid, stored[20].rowid, stored[40].rowid},
        {stored[33].rowid},
        {stored[0].rowid, stored[-1].rowid},
    ):
        found = await store.search.full_text(CHAT, "garden tomato", limit=50, exclude=left_out)
        expected = [(h.message.rowid, h.score) for h in everything if h.message.rowid not in left_out][:50]
        assert [(h.message.rowid, h.score) for h in found] == expected
        assert len(found) == 50


async def _ranking_steps(store: SqliteStore, exclude: frozenset[int]) -> tuple[int, list[tuple[object, ...]]]:
    """Instructions SQLite runs for the full-text ranking statement (`full_text._best`) of "garden" over
    the chat, with `exclude` left out, and its rows."""

    def rank(connection: apsw.Connection) -> tuple[int, list[tuple[object, ...]]]:
        steps = 0

        def count() -> bool:
            nonlocal steps
            steps += STEP
            return False

        connection.set_progress_handler(count, STEP)
        try:
            rows = full_text._best(connection, '"garden"', None, 40, exclude)
        finally:
            connection.set_progress_handler(None)
        return steps, rows

    return await store.db.run(rank)


async def test_a_window_above_the_matches_costs_no_probe_a_match(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        stored = await store.messages.append_many(
            [MessageRecord(CHAT, Role.USER, f"garden note {i} {'dinner ' * (i % 3)}") for i in range(MATCHES)]
        )
        window = frozenset(m.rowid for m in stored[-20:])
        alone, everything = await _ranking_steps(store, frozenset())
        left_out, rows = await _ranking_steps(store, window)
        kept = [row for row in everything if row[0] not in window]
        assert len(rows) == 200 and rows[: len(kept)] == kept
        # Two comparisons a match below the window (~2-3 instructions); the set's probe with its NULL rule
        # was ~8 a match, for every one of the 1,500.
        assert left_out - alone < 4 * MATCHES, (left_out, alone)
    finally:
        await store.aclose()
