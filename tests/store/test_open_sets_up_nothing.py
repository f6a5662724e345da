"""The configured store's open (`backend.open_storage`) sets up nothing unless its caller asks (the engine's
start): on a SQLite path with no klaw.db and a PostgreSQL database klaw never set up it answers
`StoreNotSetUp` and leaves both as they are, no file and no table made, where each command used to ask
first itself (decision 467). Commands that read map it at their edge: `klaw schedule add --inject-into`'s
stored chats are none, `klaw log check`'s interrupted forgets none. Against a real file and the tests' PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import psycopg
import pytest

from klaw.cli.stored_chats import chats_with_messages
from klaw.config import DatabaseConfig, EngineConfig
from klaw.home import KlawHome
from klaw.store.backend import open_storage
from klaw.store.protocol import StoreNotSetUp
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
