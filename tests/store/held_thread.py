"""The SQLite store's database thread kept busy by a test until a block ends: what is queued meanwhile waits
behind it (tests/store/test_write_groups.py), or runs beside it (tests/store/test_reads_beside_writes.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import apsw

from klaw.store.sqlite.store import SqliteStore


@asynccontextmanager
async def thread_held(
    store: SqliteStore, held_seconds: float, inside: Callable[[apsw.Connection], None] | None = None
) -> AsyncIterator[None]:
    """The database thread busy until the block ends (or `held_seconds`, a safety net, pass). With `inside`,
    the thread runs it in a write transaction first and holds that uncommitted, committing as the block ends;
    without, the thread is held outside any transaction."""
    entered, release = threading.Event(), threading.Event()

    def busy(connection: apsw.Connection) -> None:
        if inside is None:
            entered.set()
            release.wait(held_seconds)
            return
        with connection:
            inside(connection)
            entered.set()
            release.wait(held_seconds)

    held = asyncio.ensure_future(store.db.run(busy))
    await asyncio.to_thread(entered.wait, held_seconds)
    try:
        yield
    finally:
        release.set()
        await held
