"""A PostgreSQL home as newcomer19 met it (decision 475), against the tests' real server: a server not up
yet when `klaw serve` starts is retried by the service (exit 75), a missing database is not (exit 2); a
`pg_restore` by a user who may not create extensions (klaw's tables, no pgvector) is named at once with the
fix, by the engine's open and by `klaw config check`, and the docs' recipe brings everything back; a user who
may not create pgvector is told who may, not to install what is installed."""

from __future__ import annotations

import asyncio
import subprocess
from itertools import count
from pathlib import Path

from klaw.cli.service_cmd import unit_text
from klaw.home import KlawHome
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.cli.klaw_here import klaw_here
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_HOME_DSN"
_names = count()


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n"
    (home / "engine.yaml").write_text(config, "utf-8")
    (home / "engine.yaml").chmod(0o600)
    return home


def _said(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    return " ".join(result.stderr.split())


def _role_and_database(server: PgServer) -> tuple[str, str, str]:
    """A role that is no superuser and a new, empty database it owns (as newcomer19 had); its DSN."""
    n = next(_names)
    role, database = f"klaw_owner_{n}", f"klaw_restore_{n}"
    server.admin(f"CREATE ROLE {role} LOGIN")
    server.admin(f"CREATE DATABASE {database} OWNER {role}")
    return role, database, server.dsn(database).replace("postgresql://postgres@", f"postgresql://{role}@")


def test_a_server_not_up_yet_is_retried_by_the_service_and_a_missing_database_is_not(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    home = _home(tmp_path)
    nobody_there = f"postgresql://klaw:secret@/klaw?host={tmp_path}&connect_timeout=2"  # no server's socket
    down = klaw_here(home, "serve", env={VARIABLE: nobody_there})
    said = _said(down)
    assert down.returncode == 75, said
    assert f"cannot reach the PostgreSQL server named by {VARIABLE}" in said and "secret" not in said
    assert "A service (klaw service install's unit) retries it every 5 s" in said, said
    assert "run by hand: start it again once PostgreSQL is up" in said and "will be retried" not in said, said

    missing = klaw_here(home, "serve", env={VARIABLE: postgres_server.dsn("klaw_no_such_database")})
    said = _said(missing)
    assert missing.returncode == 2 and "does not exist" in said and "retried" not in said, said
    # The unit's ordering after the network pulls the target in too (After= alone waits for nothing).
    assert "Wants=network-online.target\nAfter=network-online.target\n" in unit_text(KlawHome(home))


def test_a_restore_without_pgvector_is_named_with_its_fix_and_the_recipe_restores_everything(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    server = postgres_server
    _, source, source_dsn = _role_and_database(server)
    server.psql("CREATE EXTENSION vector", source)  # an administrator did, once, as docs/postgres.md says

    async def keep_a_message() -> None:
        store = await PostgresStore.open(source_dsn, variable=VARIABLE)
        try:
            await store.messages.append(
                MessageRecord(ChatRef("console", "restore"), Role.USER, "the spare key is under the fern")
            )
        finally:
            await store.aclose()

    asyncio.run(keep_a_message())
    dump = tmp_path / "klaw.dump"
    subprocess.run([server.bin / "pg_dump", "-Fc", "-f", dump, "-d", source_dsn], check=True, capture_output=True)

    # Restored by the database's owner, who may not create extensions: pgvector and its tables are skipped.
    _, restored, restored_dsn = _role_and_database(server)
    first = subprocess.run([server.bin / "pg_restore", "-d", restored_dsn, dump], capture_output=True, text=True)
    assert first.returncode == 1 and 'permission denied to create extension "vector"' in first.stderr
    home = _home(tmp_path)
    info = klaw_here(home, "db", "info", env={VARIABLE: restored_dsn})
    said = _said(info)
    assert info.returncode == 2 and "cannot reach" not in said, said
    assert "holds klaw's tables but not the vector extension (pgvector)" in said, said
    assert "have a superuser run CREATE EXTENSION vector in that database, then run the pg_restore again" in said
    check = klaw_here(home, "config", "check", env={VARIABLE: restored_dsn})
    assert check.returncode == 1 and "but not the vector extension" in _said(check), check.stdout

    # The extension made, the vector tables are still missing: said so, then the restore run again brings them.
    server.psql("CREATE EXTENSION vector", restored)
    info = klaw_here(home, "db", "info", env={VARIABLE: restored_dsn})
    said = _said(info)
    assert info.returncode == 2 and "but not message_vectors, memory_vectors, summary_vectors" in said, said
    again: list[str | Path] = [
        server.bin / "pg_restore",
        "--clean",
        "--if-exists",
        "--no-comments",
        "-d",
        restored_dsn,
        dump,
    ]
    rerun = subprocess.run(again, capture_output=True, text=True)
    assert "must be owner of extension vector" in rerun.stderr  # the one harmless error docs/postgres.md names
    info = klaw_here(home, "db", "info", env={VARIABLE: restored_dsn})
    assert info.returncode == 0 and "messages" in info.stdout, _said(info)
    found = klaw_here(home, "memory", "search", "spare key fern", env={VARIABLE: restored_dsn})
    assert found.returncode == 0 and "fern" in found.stdout, _said(found)


def test_a_user_who_may_not_create_pgvector_is_told_who_may_not_to_install_it(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    _, _, dsn = _role_and_database(postgres_server)  # no extension there yet, and its owner may not create it
    home = _home(tmp_path)
    for command in (("serve",), ("config", "check")):  # the start's migration, and the check's look beforehand
        result = klaw_here(home, *command, env={VARIABLE: dsn})
        said = _said(result)
        assert result.returncode != 0, said
        assert f"pgvector is installed on the PostgreSQL server named by {VARIABLE}, but its database user" in said
        assert "have a superuser run CREATE EXTENSION vector there" in said, said
        assert "install pgvector" not in said, said
