"""Two `klaw engine` processes on one PostgreSQL database with different embedders (decision 532).

adversary32 started engine B (embedder dim 32) beside a running engine A (dim 384): B started without a
word and re-bound `index_meta` under A. Now B refuses to start while A runs, even over empty vector
tables, naming both embedders and the ways out; A's binding is untouched and A goes on answering. An
engine with A's embedder starts beside it as before."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

import tests.engine.test_several_engines as several
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.conftest import new_database
from tests.pg_server import PgServer


def _config(dim: int) -> Callable[[KlawHome, str], None]:
    def write(home: KlawHome, base_url: str) -> None:
        home.config_file.write_text(
            "models:\n"
            f"  fake/slow:\n    baseUrl: {base_url}\n    contextBudget: 8000\n    maxRetries: 0\n"
            "routing:\n  default: fake/slow\n"
            f"embedder:\n  backend: fake\n  dim: {dim}\n"
            "summarizer:\n  enabled: false\n"
            "processing:\n  debounceMs: 50\n"
            f"database:\n  backend: postgres\n  urlEnv: {several.VARIABLE}\n  leaseSeconds: 3\n",
            encoding="utf-8",
        )

    return write


def _bindings(dsn: str) -> set[tuple[str, str, int]]:
    with psycopg.connect(dsn) as connection:
        rows = connection.execute("SELECT table_name, embedder_id, dim FROM index_meta").fetchall()
    return {(str(table), str(model), int(dim)) for table, model, dim in rows}


async def test_an_engine_with_another_embedder_is_refused_while_one_runs(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    async with FakeOpenAiServer() as server:
        monkeypatch.setattr(several, "_write_config", _config(384))
        async with several._engine(tmp_path / "a", server.base_url, dsn) as a:
            bound = _bindings(dsn)
            assert ("message_vectors", "fake-hash-384", 384) in bound  # vector tables still empty
            await asyncio.sleep(2)  # past a third of the lease: A renewed its record at least once
            monkeypatch.setattr(several, "_write_config", _config(32))
            with pytest.raises(AssertionError):  # the engine process exits instead of listening
                async with several._engine(tmp_path / "b", server.base_url, dsn):
                    pass
            said = (tmp_path / "b" / "engine.err").read_text()
            assert "another engine" in said and "'fake-hash-384' (dim 384)" in said, said[-1500:]
            assert "'fake-hash-32' (dim 32)" in said and "stop the other engine first" in said, said[-1500:]
            assert "klaw reindex" in said and "Traceback" not in said, said[-1500:]
            assert _bindings(dsn) == bound  # A's binding untouched
            assert await a.send("a1", "c1")  # A still takes messages
            monkeypatch.setattr(several, "_write_config", _config(384))
            async with several._engine(tmp_path / "c", server.base_url, dsn) as c:  # same embedder: welcome
                assert await c.send("c1", "c2")
    assert _bindings(dsn) == bound


def _sqlite_config(home: KlawHome, database: Path, dim: int) -> None:
    home.config_file.write_text(
        "models:\n  fake/x:\n    baseUrl: http://127.0.0.1:9/v1\n    contextBudget: 8000\n"
        "routing:\n  default: fake/x\n"
        f"embedder:\n  backend: fake\n  dim: {dim}\nsummarizer:\n  enabled: false\n"
        f"database:\n  path: {database}\n",
        encoding="utf-8",
    )


async def test_two_homes_pointed_at_one_sqlite_file_run_one_engine(tmp_path: Path) -> None:
    """SQLite: one engine per home, and klaw.db in the home, unless `database.path` is absolute. Two homes
    pointed at one file ran two engines on it, B re-binding `index_meta` to dim 32 under A (adversary32's
    case, on SQLite). Now B is refused while A runs, naming the file and the way out."""
    database = tmp_path / "shared" / "klaw.db"
    homes = [KlawHome(tmp_path / name) for name in ("a", "b", "c", "d", "e")]
    for home, dim in zip(homes, (384, 32, 32, 32, 32), strict=True):
        initialise_home(home)
        _sqlite_config(home, database, dim)
    _sqlite_config(homes[2], database.with_name("other.db"), 32)  # another file in the same folder
    _sqlite_config(homes[4], homes[4].root / "klaw.db", 32)  # a home's own file (its home lock holds it)
    _sqlite_config(homes[3], homes[4].root / "klaw.db", 32)  # and another home pointed at it

    async def start(home: KlawHome) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "klaw", "engine", env={**os.environ, "KLAW_HOME": str(home.root)},
            stdout=asyncio.subprocess.DEVNULL, stderr=(home.root / "engine.err").open("wb"),
        )  # fmt: skip

    async def started(engine: asyncio.subprocess.Process, home: KlawHome) -> None:
        async with asyncio.timeout(120):
            while not home.socket_path.exists():
                assert engine.returncode is None, (home.root / "engine.err").read_text()
                await asyncio.sleep(0.05)

    a = await start(homes[0])
    c: asyncio.subprocess.Process | None = None
    e: asyncio.subprocess.Process | None = None
    try:
        await started(a, homes[0])
        # its own file beside A's runs (the lock was the folder's: C was refused as if on A's file)
        c = await start(homes[2])
        await started(c, homes[2])
        e = await start(homes[4])
        await started(e, homes[4])
        d = await start(homes[3])
        assert await asyncio.wait_for(d.wait(), 120) != 0
        said = (homes[3].root / "engine.err").read_text()
        assert f"is running on the SQLite database {homes[4].root / 'klaw.db'}" in said, said
        b = await start(homes[1])
        assert await asyncio.wait_for(b.wait(), 120) != 0
        said = (homes[1].root / "engine.err").read_text()
        assert f"is running on the SQLite database {database}" in said, said
        assert "own database.path" in said and "Traceback" not in said, said
        with sqlite3.connect(database) as connection:
            rows = connection.execute("SELECT DISTINCT embedder_id, dim FROM index_meta").fetchall()
        assert rows == [("fake-hash-384", 384)]
    finally:
        for engine in (a, c, e):
            if engine is not None and engine.returncode is None:
                engine.send_signal(signal.SIGTERM)
                await asyncio.wait_for(engine.wait(), 60)
