"""A start-up that fails at any step leaves nothing running: no task, no thread, no open file or
socket, no socket file. Each step is made to fail by real means (a database that is a directory,
vectors of another embedder, another engine on the socket, a scheduler.db that cannot be opened) or
by a bad part passed through the library API (a tool without a description)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
from klaw.engine.socket_file import EngineAlreadyRunningError
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.store.protocol import IndexMismatchError
from klaw.store.records import MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.engine import short_socket_dir
from tests.engine.harness import CHAT, engine_config

UNUSED_MODEL_URL = "http://127.0.0.1:9/v1"  # no step reaches a model


@pytest.fixture
def home() -> Iterator[KlawHome]:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        yield home


def running_now() -> tuple[set[asyncio.Task[Any]], set[str], int]:
    tasks = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
    # Process-wide pools keep idle workers for reuse (the loop's asyncio_N, the log's klaw-log_N); they
    # belong to no engine and hold nothing.
    threads = {t.name for t in threading.enumerate() if not t.name.startswith(("asyncio_", "klaw-log_"))}
    return tasks, threads, len(os.listdir("/proc/self/fd"))


async def leave_unanswered(home: KlawHome) -> None:
    """A message a previous run stored and never answered: resume queues its turn (a timer task)."""
    store = await SqliteStore.open(home.database_file("klaw.db"))
    try:
        record = MessageRecord(CHAT, Role.USER, "still waiting", created_at=ManualClock().now())
        await Ingestion(ConversationLog(home.conversations), store).accept(record)
    finally:
        await store.aclose()


async def nothing_left(start: Callable[[], Any], error: type[BaseException], home: KlawHome) -> None:
    await asyncio.sleep(0)
    before = running_now()
    with pytest.raises(error):
        await start()
    for _ in range(3):
        await asyncio.sleep(0)  # closed tasks finish their last step
    tasks, threads, fds = running_now()
    assert tasks - before[0] == set()
    assert threads == before[1]
    assert fds == before[2]
    assert not home.socket_path.exists()


def starter(home: KlawHome, **kwargs: Any) -> Callable[[], Any]:
    config = engine_config(UNUSED_MODEL_URL, **kwargs.pop("config", {}))
    return lambda: Engine.start(home, config, clock=ManualClock(), **kwargs)


async def test_the_database_cannot_be_opened(home: KlawHome) -> None:
    home.database_file("klaw.db").mkdir(parents=True)
    await nothing_left(starter(home), Exception, home)


async def test_the_vectors_are_another_embedders(home: KlawHome) -> None:
    """A previous run's vectors come from a 16-dimensional embedder; this engine's has 32."""
    store = await SqliteStore.open(home.database_file("klaw.db"))
    try:
        record = MessageRecord(CHAT, Role.USER, "embedded by another model", created_at=ManualClock().now())
        stored = await Ingestion(ConversationLog(home.conversations), store).accept(record)
        await store.vectors.bind_embedder("another-model", 16)
        await store.vectors.put([(stored.rowid, np.full(16, 0.25, dtype=np.float32))])
    finally:
        await store.aclose()
    await nothing_left(starter(home), IndexMismatchError, home)


async def test_a_tool_passed_in_cannot_be_described(home: KlawHome) -> None:
    async def undescribed(x: int) -> int:
        return x

    await leave_unanswered(home)
    await nothing_left(starter(home, tools=[undescribed]), ValueError, home)


async def test_another_engine_holds_the_socket(home: KlawHome) -> None:
    await leave_unanswered(home)
    other = await asyncio.start_unix_server(lambda r, w: w.close(), path=str(home.socket_path))
    try:
        before = running_now()
        with pytest.raises(EngineAlreadyRunningError):
            await starter(home)()
        for _ in range(3):
            await asyncio.sleep(0)
        tasks, threads, fds = running_now()
        assert (tasks - before[0], threads, fds) == (set(), before[1], before[2])
        assert home.socket_path.exists()  # the other engine's, untouched
    finally:
        other.close()
        await other.wait_closed()


async def test_the_scheduler_cannot_open_its_database(home: KlawHome) -> None:
    """The last step before listening: the socket was claimed and a resumed turn queued; both go."""
    await leave_unanswered(home)
    home.scheduler_db.mkdir(parents=True)
    await nothing_left(starter(home), Exception, home)


async def test_a_started_engine_shut_down_leaves_nothing_either(home: KlawHome) -> None:
    await leave_unanswered(home)
    before = running_now()
    engine = await starter(home)()
    assert home.socket_path.exists()
    await engine.shutdown(timeout_seconds=1)
    for _ in range(3):
        await asyncio.sleep(0)
    tasks, threads, fds = running_now()
    assert (tasks - before[0], threads, fds) == (set(), before[1], before[2])
    assert not home.socket_path.exists()
