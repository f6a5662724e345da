"""The database's threads after the lighter hand-off (thread_worker.py, decision 491) keep what the executors
gave: cancelled work not started is not run, started work ends and its result is dropped without an error on
the loop, a row whose log line was written is stored even if its awaiter went away, errors reach the caller,
close runs what was queued and leaves no thread behind. A real klaw.db file throughout."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from klaw.store.sqlite.connection import SqliteDatabase


def _klaw_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("klaw-sqlite")}


async def _opened(tmp_path: Path) -> SqliteDatabase:
    db = await SqliteDatabase.open(tmp_path / "klaw.db")
    await db.run(lambda c: c.execute("CREATE TABLE t (x INTEGER)"))
    return db


def _count(connection: apsw.Connection) -> int:
    count = connection.execute("SELECT count(*) FROM t").fetchall()[0][0]
    assert isinstance(count, int)
    return count


def _loop_errors() -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    return errors


async def test_work_cancelled_before_it_starts_is_not_run_and_started_work_ends_quietly(tmp_path: Path) -> None:
    errors = _loop_errors()
    db = await _opened(tmp_path)
    entered, release = threading.Event(), threading.Event()

    def hold(connection: apsw.Connection) -> str:
        entered.set()
        release.wait(30)
        return "held"

    held = asyncio.ensure_future(db.run(hold))
    await asyncio.to_thread(entered.wait, 30)
    waiting = asyncio.ensure_future(db.run(lambda c: c.execute("INSERT INTO t VALUES (1)")))
    read_waiting = asyncio.ensure_future(db.read(lambda c: c.execute("INSERT INTO t VALUES (9)")))
    await asyncio.sleep(0.05)
    waiting.cancel()
    held.cancel()  # started: it runs to its end, its result dropped (no set_result on a cancelled future)
    release.set()
    await asyncio.sleep(0)
    assert await db.run(_count) == 0  # the cancelled insert never ran
    assert held.cancelled() and waiting.cancelled()
    with pytest.raises(apsw.ReadOnlyError):  # a read connection's error reaches its caller
        await read_waiting
    await asyncio.sleep(0.05)
    await db.aclose()
    assert errors == []


async def test_a_row_after_its_log_line_is_stored_even_if_its_awaiter_went_away(tmp_path: Path) -> None:
    db = await _opened(tmp_path)
    wrote = threading.Event()
    go = threading.Event()

    def log_first() -> None:
        wrote.set()
        go.wait(30)

    pending = asyncio.ensure_future(db.run_after(log_first, lambda c: c.execute("INSERT INTO t VALUES (2)")))
    await asyncio.to_thread(wrote.wait, 30)
    pending.cancel()
    go.set()
    for _ in range(200):
        if await db.run(_count) == 1:
            break
        await asyncio.sleep(0.01)
    assert await db.run(_count) == 1
    failing = db.run_after(lambda: 1 / 0, lambda c: c.execute("INSERT INTO t VALUES (3)"))
    with pytest.raises(ZeroDivisionError):
        await failing
    await db.aclose()


async def test_close_runs_what_was_queued_then_leaves_no_thread(tmp_path: Path) -> None:
    before = _klaw_threads()  # another test's store, if any, is not this one's
    db = await _opened(tmp_path)
    assert await db.read(_count) == 0  # the read threads started
    assert len(_klaw_threads() - before) == 3  # the database thread and two readers
    queued = [asyncio.ensure_future(db.run(lambda c: c.execute("INSERT INTO t VALUES (4)"))) for _ in range(20)]
    await asyncio.sleep(0)  # each submitted, none awaited
    with pytest.raises(ValueError, match="boom"):
        await db.run(lambda c: (_ for _ in ()).throw(ValueError("boom")))
    await db.aclose()
    await asyncio.gather(*queued)
    assert _klaw_threads() <= before
    again = await SqliteDatabase.open(tmp_path / "klaw.db")
    assert await again.run(_count) == 20
    await again.aclose()
    assert _klaw_threads() <= before


async def test_an_idle_database_thread_writes_the_log_line_itself_a_busy_one_leaves_it_to_the_log_threads(
    tmp_path: Path,
) -> None:
    """Decision 519: one thread woken instead of two when the database thread has nothing to do; when it is
    busy the line is written beside its work, as before. Either way the row comes after its line, and a
    line that could not be written keeps its row out."""
    db = await _opened(tmp_path)
    wrote_on: list[str] = []
    lines: list[int] = []

    def log_first(value: int) -> None:
        lines.append(value)
        wrote_on.append(threading.current_thread().name)

    def insert(value: int) -> Any:
        def write(connection: apsw.Connection) -> int:
            assert value in lines  # its line came first
            connection.execute("INSERT INTO t VALUES (?)", (value,))
            return value

        return write

    assert await db.run_after(lambda: log_first(1), insert(1)) == 1
    assert wrote_on == ["klaw-sqlite_0"]

    release = threading.Event()
    busy = asyncio.ensure_future(db.run(lambda _c: release.wait(30)))
    await asyncio.sleep(0.05)  # the database thread is in it
    pending = asyncio.ensure_future(db.run_after(lambda: log_first(2), insert(2)))
    for _ in range(300):
        if len(wrote_on) == 2:
            break
        await asyncio.sleep(0.01)
    assert wrote_on[1].startswith("klaw-log-first")  # written while the database thread was busy
    assert not pending.done()  # its row waits for the database thread
    release.set()
    assert await busy and await pending == 2

    with pytest.raises(ZeroDivisionError):  # idle again: a line that fails there keeps its row out
        await db.run_after(lambda: 1 / 0, insert(3))
    assert await db.run(_count) == 2
    await db.aclose()
