"""A benchmark never writes into the person's own memory (newcomer14, a BLOCKER): `klaw bench scale`'s
reindex part rebuilt the home's configured database, so on PostgreSQL it swapped the live tables under a
running engine (22 acknowledged messages lost from the log) and on SQLite with an absolute `database.path`
it replaced klaw.db with the bench's messages; `klaw bench turn` opened that same file for its engine.
Real commands, a real SQLite file and the tests' real PostgreSQL; the person's database before and after."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.config import DatabaseConfig
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.store.backend import open_storage
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_BENCH_OWN_DATABASE_URL"
SCALE = ["bench", "scale", "--size", "100", "--queries", "1", "--past-segments", "1", "--reindex-size", "50"]
TURN = ["bench", "turn", "--stored", "20", "--turns", "2", "--chats", "2", "--chat-turns", "2"]


async def _remember(path: Path, database: DatabaseConfig) -> None:
    store = await open_storage(path, database, creating=True)
    try:
        await store.messages.append(MessageRecord(ChatRef("console", "me"), Role.USER, "my dog is called Rex"))
    finally:
        await store.aclose()


def _home(tmp_path: Path, database: str) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    home.config_file.write_text(f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n{database}", "utf-8")
    return home


def test_an_absolute_sqlite_path_is_left_as_it_was(tmp_path: Path) -> None:
    mine = tmp_path / "elsewhere" / "my-memory.db"
    mine.parent.mkdir(mode=0o700)
    home = _home(tmp_path, f"  path: {mine}\n")
    asyncio.run(_remember(mine, DatabaseConfig(path=str(mine))))
    before = hashlib.sha256(mine.read_bytes()).hexdigest()

    for args in (SCALE, TURN):
        result = CliRunner().invoke(app, args, env={"KLAW_HOME": str(home.root), "COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert hashlib.sha256(mine.read_bytes()).hexdigest() == before, args[1]


def test_a_postgres_home_keeps_its_log_and_tables(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = new_database(postgres_server)
    dsn = postgres_server.dsn(name)
    home = _home(tmp_path, f"  backend: postgres\n  urlEnv: {VARIABLE}\n")
    database = DatabaseConfig(backend="postgres", url_env=VARIABLE)
    env = {"KLAW_HOME": str(home.root), "COLUMNS": "200", VARIABLE: dsn}

    def state() -> str:
        return postgres_server.psql(
            "SELECT (SELECT count(*) FROM log_records), (SELECT count(*) FROM messages),"
            " 'messages'::regclass::oid, (SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'klaw_%')",
            name,
        )

    with monkeypatch.context() as patched:
        patched.setenv(VARIABLE, dsn)
        asyncio.run(_remember(tmp_path / "unused.db", database))
    before = state()
    assert before.startswith("1|1|"), before

    result = CliRunner().invoke(app, SCALE, env=env)

    assert result.exit_code == 0, result.output
    assert "a throwaway SQLite home of 50 messages" in " ".join(result.output.split())
    assert "klaw reindex of 50 messages" in " ".join(result.output.split())  # the bench's, not the live log's
    assert state() == before  # no rebuild swapped in: same rows, the same table, no schema left behind
