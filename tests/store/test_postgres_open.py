"""Opening the PostgreSQL store: the DSN only from the variable `database.urlEnv` names, and every failure
one line that names the variable and what to do, never the DSN (it holds a password)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from klaw.config import DatabaseConfig
from klaw.store.backend import open_storage
from klaw.store.postgres.store import PostgresStore
from klaw.store.protocol import StorageError
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"
POSTGRES = DatabaseConfig(backend="postgres", url_env=VARIABLE)


def test_postgres_needs_the_name_of_its_variable() -> None:
    with pytest.raises(ValueError, match="urlEnv"):
        DatabaseConfig(backend="postgres")


async def test_an_unset_variable_is_named_with_what_to_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(StorageError, match=f"{VARIABLE} .*is not set: export {VARIABLE}="):
        await open_storage(tmp_path / "klaw.db", POSTGRES)
    assert not (tmp_path / "klaw.db").exists()


async def test_a_server_that_does_not_answer_is_named_by_its_variable_never_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, f"postgresql://klaw:hunter2secret@/klaw?host={tmp_path}&connect_timeout=2")
    with pytest.raises(StorageError) as raised:
        await open_storage(tmp_path / "klaw.db", POSTGRES)
    said = str(raised.value)
    assert f"cannot reach the PostgreSQL server named by {VARIABLE}" in said
    assert "hunter2secret" not in said and "\n" not in said


async def test_a_refused_port_is_shown_with_its_host_the_password_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """newcomer12: `connection to server at "••••••", port •••••• failed` hid the one thing to check."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(VARIABLE, f"postgresql://klawuser:hunter2secret@127.0.0.1:{port}/klawdb?connect_timeout=2")
    with pytest.raises(StorageError) as raised:
        await open_storage(tmp_path / "klaw.db", POSTGRES)
    said = str(raised.value)
    assert f'"127.0.0.1", port {port} failed' in said, said
    assert "hunter2secret" not in said and "klawuser" not in said and "klawdb" not in said


async def test_opening_migrates_once_and_a_newer_schema_is_refused(postgres_server: PgServer) -> None:
    database = new_database(postgres_server)
    dsn = postgres_server.dsn(database)
    store = await PostgresStore.open(dsn, variable=VARIABLE)
    version = await store.schema_version()
    await store.aclose()
    again = await PostgresStore.open(dsn, variable=VARIABLE)  # nothing left to apply
    assert await again.schema_version() == version
    await again.aclose()
    postgres_server.psql("INSERT INTO schema_version VALUES (999, '0999_future.sql', 0)", database)
    with pytest.raises(StorageError, match=r"schema version 999 .*upgrade klaw"):
        await PostgresStore.open(dsn, variable=VARIABLE)
