"""How many b-trees (segments) klaw.db's full-text index is in, and merging them a bounded step at a time.

FTS5 writes each transaction's new entries as a segment of their own, and a query reads every
segment for each of its words: the more segments, the more seeks and the more doclists merged for
the same rows. FTS5's own automerge keeps the count bounded, not small: it merges a level's segments
only once 64 leaf pages have been written since its last work, so the one-page segments a turn's
appends make pile up to 15 before a "crisis" merge, and the levels above keep up to three each. The
bench's chats are left in 19-25 segments, and a full-text search over them costs 20-30 % more CPU
than over the same index merged (decision 251).

`merge_step` does one bounded piece of the merging (FTS5's `'merge'` command: at most `pages` leaf
pages written, with `usermerge` 2, so any level holding two segments is merged, and a level holding
one is left as it is: each entry is rewritten about once per level, not once per merge as
`'optimize'` would). It is its own transaction on the database thread, so a turn's write waits for
one step at most. `merged` runs steps until none finds work (`klaw reindex`, before the file goes
live); the engine runs them in the background (`engine/full_text_upkeep.py`).

Forgetting is unchanged: a forgotten message's entry was removed from its segment by FTS5's
secure-delete when it was forgotten, a merge copies only the entries left, and the pages of the
merged segments are freed under `PRAGMA secure_delete` (zeroed).
"""

from __future__ import annotations

import apsw

from klaw.store.sqlite.query import fetch_one

MERGED_TABLES = ("messages_fts", "messages_fts_last")
MERGE_PAGES = 64  # leaf pages (4 kB each) written at most by one step: ~7-9 ms of CPU at 100k-1M messages
USERMERGE = 2  # a level of two segments is merged (FTS5's default, 4, leaves up to three a level)
_STRUCTURE_ROWID = 10  # FTS5 keeps the list of segments in this row of `<table>_data`
_STRUCTURE_V2 = b"\xff\x00\x00\x01"


def segment_count(connection: apsw.Connection, table: str = "messages_fts") -> int:
    """The segments `table`'s index is in, from FTS5's structure record (0 for an index never written)."""
    row = fetch_one(connection, f"SELECT block FROM {table}_data WHERE id = ?", (_STRUCTURE_ROWID,))
    if row is None or not row[0]:
        return 0
    block = bytes(row[0])
    at = 8 if block[4:8] == _STRUCTURE_V2 else 4  # a 4-byte cookie, then the V2 marker when present
    _levels, at = _varint(block, at)
    segments, _ = _varint(block, at)
    return segments


def merge_step(connection: apsw.Connection, pages: int = MERGE_PAGES) -> bool:
    """One bounded step of merging each of `MERGED_TABLES`, in one transaction; whether any work was
    done (FTS5 changes its structure record when it merges: two or more changes)."""
    worked = False
    with connection:
        for table in MERGED_TABLES:
            _use_usermerge(connection, table)
            before = connection.total_changes()
            connection.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)", (pages,))
            worked = worked or connection.total_changes() - before >= 2
    return worked


def merged(connection: apsw.Connection, pages: int = MERGE_PAGES * 16) -> int:
    """Steps of `merge_step` until none finds work; how many did (offline: a step may take longer)."""
    steps = 0
    while merge_step(connection, pages):
        steps += 1
    return steps


def _use_usermerge(connection: apsw.Connection, table: str) -> None:
    """`usermerge` set to `USERMERGE` in `table`'s config, once (a table made again by `tokenizers.py`
    starts with FTS5's default)."""
    row = fetch_one(connection, f"SELECT v FROM {table}_config WHERE k = 'usermerge'")
    if row is None or row[0] != USERMERGE:
        connection.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('usermerge', ?)", (USERMERGE,))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint at `at`: its value and where the next one starts."""
    value = 0
    for offset in range(8):
        byte = data[at + offset]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + offset + 1
    return (value << 8) | data[at + 8], at + 9
