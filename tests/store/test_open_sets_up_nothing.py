"""The configured store's open (`backend.open_storage`) sets up nothing unless its caller asks (the engine's
start): on a SQLite path with no klaw.db and a PostgreSQL database klaw never set up it answers
`StoreNotSetUp` and leaves both as they are, no file and no table made, where each command used to ask
first itself (decision 467). Commands that read map it at their edge: `klaw schedule add --inject-into`'s
stored chats are none, `klaw log check`'s interrupted forgets none. Against a real file and the tests' PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import stat
import uuid
from pathlib import Path

import psycopg
import pytest

from klaw.cli.stored_chats import chats_with_messages
from klaw.config import DatabaseConfig, EngineConfig
from klaw.home import KlawHome
from klaw.store.backend import open_storage
from klaw.store.protocol import StorageError, StoreNotSetUp
from tests.cli.klaw_here import klaw_here
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


async def _open_and_close(path: Path, database: DatabaseConfig) -> None:
    store = await open_storage(path, database, creating=True)
    await store.aclose()


def test_no_klaw_db_is_left_absent_unless_the_engine_asks(tmp_path: Path) -> None:
    from klaw.cli.memory_forget_cmd import pending_forgets

    home = KlawHome(tmp_path / "home")
    home.root.mkdir()
    config = EngineConfig()
    path = home.database_file(config.database.path)

    with pytest.raises(StoreNotSetUp) as refused:
        asyncio.run(open_storage(path, config.database))
    assert str(refused.value) == f"{path} does not exist yet: it is created when the engine first starts"
    assert asyncio.run(chats_with_messages(home, config)) == []
    assert pending_forgets(home, config.database) == []
    assert list(home.root.iterdir()) == []  # no klaw.db, -wal or -shm made
    asyncio.run(_open_and_close(path, config.database))  # as the engine's start does
    assert path.exists()


async def test_a_postgres_database_klaw_never_set_up_is_left_as_it_is(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"klaw_never_{uuid.uuid4().hex[:8]}"
    postgres_server.admin(f"CREATE DATABASE {name}")  # from template1: no klaw, no pgvector
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(name))
    try:
        with pytest.raises(StoreNotSetUp) as refused:
            await open_storage(tmp_path / "klaw.db", DatabaseConfig(backend="postgres", url_env=VARIABLE))
        assert str(refused.value) == (
            f"no klaw database in the PostgreSQL database named by {VARIABLE} yet: `klaw serve` sets it up"
        )
        with psycopg.connect(postgres_server.dsn(name)) as connection:
            made = connection.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
            ).fetchone()
            extensions = connection.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert made == (0,) and extensions == (0,)
        assert not (tmp_path / "klaw.db").exists()
    finally:
        postgres_server.admin(f"DROP DATABASE {name} WITH (FORCE)")


def _other_programs_database(path: Path) -> None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount INTEGER)")
        connection.execute("INSERT INTO invoices VALUES (1, 100)")
        connection.commit()
    path.chmod(0o644)


def _tables(path: Path) -> list[str]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as connection:
        return [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def test_another_programs_sqlite_file_is_left_as_it_is_and_the_start_refuses_it(tmp_path: Path) -> None:
    """adversary27 M5: `database.path` at another program's SQLite file: `klaw db info` wrote klaw's 34 tables
    into it and every command chmodded it 0600 (it is outside the home). Now a file without klaw's
    schema_version is not set up for a command, and the engine's start refuses it, naming the path; an
    empty file (a crash's klaw.db) is not set up for a command and set up by the start (decision 478)."""
    home = tmp_path / "home"
    klaw_here(home, "init")
    other = tmp_path / "other_app.db"
    _other_programs_database(other)
    said = klaw_here(home, "db", "info", env={"KLAW__DATABASE__PATH": str(other)})
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == (
        f"{other} is not a klaw database (1 table of another program, none of klaw's): point database.path in"
        " engine.yaml at a file of klaw's own."
    )
    with pytest.raises(StorageError) as refused:
        asyncio.run(_open_and_close(other, DatabaseConfig(path=str(other))))  # as the engine's start does
    assert str(refused.value).startswith(f"{other} is another program's database (1 table, none of them klaw's)")
    assert _tables(other) == ["invoices"] and stat.S_IMODE(other.stat().st_mode) == 0o644
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home", "other_app.db"]  # no -wal, no -shm

    empty = tmp_path / "klaw.db"
    empty.touch()
    with pytest.raises(StoreNotSetUp) as not_yet:
        asyncio.run(open_storage(empty, DatabaseConfig()))
    assert str(not_yet.value) == f"{empty} holds no klaw database yet: it is set up when the engine first starts"
    assert _tables(empty) == []
    asyncio.run(_open_and_close(empty, DatabaseConfig()))
    assert "schema_version" in _tables(empty)
