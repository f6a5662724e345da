"""The writer checkpoints its WAL every ~4,000 frames, not SQLite's 1,000 (decision 483).

A turn writes ~90 WAL frames, mostly the same few pages again; a checkpoint copies each distinct page
once, so spacing them out copies fewer. Here a real klaw.db takes appends one transaction at a time,
as turns do, and its `-wal` file is watched: it grows past what SQLite's default would let it reach
(on the old code it never held more than ~1,000 frames and one commit's), and it still stops growing
near 4,000 frames, so the checkpoints go on (klaw.db does not leave its WAL to grow without end).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHAT = ChatRef("console", "wal")
DEFAULT_SPACING = 1000  # SQLite's own `wal_autocheckpoint`
SPACING = 4000  # klaw's (store/sqlite/connection.py's WAL_AUTOCHECKPOINT)
APPENDS = 450  # ~18 frames each on a new klaw.db: ~8,000 frames, two checkpoints' worth


def said(n: int) -> MessageRecord:
    role = Role.USER if n % 2 == 0 else Role.ASSISTANT
    return MessageRecord(
        CHAT, role, f"message {n} about the garden and the weather", created_at=T0 + timedelta(seconds=n)
    )


async def pragma(store: SqliteStore, name: str) -> int:
    """The writer connection's value of `PRAGMA name`."""
    rows = await store.db.run(lambda connection: connection.execute(f"PRAGMA {name}").fetchall())
    return int(str(rows[0][0]))


async def test_the_wal_is_checkpointed_every_four_thousand_frames(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    store = await SqliteStore.open(path)
    try:
        page_size = await pragma(store, "page_size")
        spacing = await pragma(store, "wal_autocheckpoint")
        frame = page_size + 24  # a WAL frame: its page and a 24-byte header
        wal = path.with_name(path.name + "-wal")
        largest = 0
        for n in range(APPENDS):
            await store.messages.append(said(n), embed=True)  # one transaction, as a turn's message
            largest = max(largest, wal.stat().st_size // frame)
    finally:
        await store.aclose()

    assert largest > 2 * DEFAULT_SPACING, (
        f"the WAL never held more than {largest} frames: checkpointed as often as before"
    )
    assert largest < SPACING + 500, f"the WAL reached {largest} frames: no checkpoint near {SPACING}"
    assert spacing == SPACING
