"""A background worker that meets a damaged SQLite file says once, in words, what is wrong and the fix
(`klaw reindex`), and stops, instead of retrying every second as if the trouble would pass (decision 326).

The worker reads a real file SQLite refuses ("file is not a database", as a klaw.db whose pages were
overwritten); the manual clock is moved well past every backoff. Before, the worker backed off and read it
again, with a warning naming only the error class each time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import apsw
import pytest

from klaw.engine.clock import ManualClock
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.summaries.worker import BackgroundWorker, WorkerState
from klaw.scheduling.task_store import ScheduleStore
from klaw.store.protocol import Storage
from tests.engine.test_scheduler_loop import start
from tests.memory.summary_rig import until


class ReadsKlawDb(BackgroundWorker):
    """A worker whose step reads the database, as the summarizers' scans do."""

    def __init__(self, path: Path, clock: ManualClock) -> None:
        super().__init__("exchange summarizer", clock, idle_seconds=60)
        self.path = path
        self.steps = 0

    async def step(self) -> bool:
        self.steps += 1
        with apsw.Connection(str(self.path)) as connection:
            connection.execute("SELECT count(*) FROM messages").fetchall()
        return False


async def test_a_damaged_database_stops_the_summarizer_with_the_fix_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = tmp_path / "klaw.db"
    damaged.write_bytes(b"these pages were overwritten " * 400)
    clock = ManualClock()
    worker = ReadsKlawDb(damaged, clock)
    with caplog.at_level(logging.WARNING):
        worker.start()
        try:
            status = await until(worker, lambda s: s.state is WorkerState.STOPPED, "stopped on the damaged file")
            await clock.advance(3600)  # every backoff would have come and gone
        finally:
            await worker.aclose()
    assert worker.steps == 1  # not tried again
    assert status.last_error is not None
    assert "a database is damaged (file is not a database)" in status.last_error
    assert "run `klaw reindex` to rebuild it" in status.last_error
    said = [r for r in caplog.records if r.name.startswith("klaw.")]
    assert [(r.levelname, r.getMessage()) for r in said] == [("ERROR", status.last_error)]


class DamagedJobs:
    """The store's job table on a damaged klaw.db: every call reads the file and meets SQLite's refusal."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.calls = 0

    def __getattr__(self, name: str) -> Callable[..., Awaitable[object]]:
        async def read(*_: object, **__: object) -> object:
            self.calls += 1
            connection = apsw.Connection(str(self.path))
            try:
                return connection.execute("SELECT count(*) FROM embedding_jobs").fetchall()
            finally:
                connection.close()

        return read


async def test_a_damaged_database_stops_the_embedding_queue_with_the_fix_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = tmp_path / "klaw.db"
    damaged.write_bytes(b"these pages were overwritten " * 400)
    jobs = DamagedJobs(damaged)
    damaged_store = SimpleNamespace(embedding_jobs=jobs)
    clock = ManualClock()
    queue = EmbeddingQueue(
        cast(Storage, damaged_store), FakeEmbedder(32), clock, batch_size=8, targets={"message": cast(Any, None)}
    )
    with caplog.at_level(logging.WARNING):
        queue.start()
        try:
            async with asyncio.timeout(10):  # a safety net: the worker says it has caught up
                await queue.wait_idle()
            await clock.advance(3600)  # every retry pause would have come and gone
        finally:
            await queue.aclose()
    assert jobs.calls == 1  # not tried again
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("klaw.")]
    assert said == [
        (
            "ERROR",
            "embedding queue stopped: a database is damaged (file is not a database), so trying again cannot help."
            " The conversation log holds everything klaw.db had: stop the engine and run `klaw reindex` to rebuild it.",
        )
    ], said


async def said_error(caplog: pytest.LogCaptureFixture) -> None:
    """Until an error is logged (the scheduler's loop runs its reads in a thread: no event to wait on)."""
    async with asyncio.timeout(10):  # a safety net only
        while True:
            if any(r.levelname == "ERROR" for r in caplog.records):
                return
            await asyncio.sleep(0.01)


async def test_a_damaged_scheduler_db_stops_the_scheduler_with_the_fix_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ScheduleStore(tmp_path / "scheduler.db")
    store.create()
    with caplog.at_level(logging.WARNING):
        rig = await start(store)
        try:
            store.path.write_bytes(b"these pages were overwritten " * 400)
            await rig.clock.advance(60)  # its next look at the table
            await said_error(caplog)
            await rig.clock.advance(3600)  # every reload would have come and gone
        finally:
            await rig.scheduler.stop()
    said = [r for r in caplog.records if r.name.startswith("klaw.")]
    assert [(r.levelname, r.exc_info) for r in said] == [("ERROR", None)]  # once, and no traceback
    words = said[0].getMessage()
    assert words.startswith("the scheduler stopped: a database is damaged (file is not a database)"), words
    assert "move it aside" in words and "klaw schedule add" in words
