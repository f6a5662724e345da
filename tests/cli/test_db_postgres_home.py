"""`klaw db info` on a PostgreSQL home, as a person runs it: it says what the home's database is (the
server named by its variable, never the connection string), and a connection string it cannot use is
named by its variable, none of its parts (a password) shown, whether psycopg or the server repeats it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_DATABASE_URL"


def _postgres_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    init_home(home)
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    return home


def test_db_info_names_the_postgres_server_by_its_variable(tmp_path: Path, postgres_server: PgServer) -> None:
    home = _postgres_home(tmp_path)
    dsn = postgres_server.dsn(new_database(postgres_server))
    info = klaw_here(home, "db", "info", env={VARIABLE: dsn})
    assert info.returncode == 0, info.stderr
    assert f"PostgreSQL database named by {VARIABLE} (schema version" in " ".join(info.stdout.split())
    assert "klaw.db" not in info.stdout and "tokenizer porter" not in info.stdout
    assert "full text: PostgreSQL tsvector" in info.stdout
    assert dsn not in info.stdout


@pytest.mark.parametrize(
    "url",
    [
        "postgresql//klaw:hunter2@db:5432/klaw",  # no colon after the scheme: psycopg repeats it whole
        "host=db password=hunter2 port=notaport",
        "postgresql://klaw:hunter2@db:5432/klaw?sslmode=hunter2",
    ],
)
def test_a_malformed_url_is_named_by_its_variable_without_its_password(tmp_path: Path, url: str) -> None:
    result = klaw_here(_postgres_home(tmp_path), "db", "info", env={VARIABLE: url})
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert VARIABLE in said and "Traceback" not in said
    assert "hunter2" not in said and url not in said


def test_the_servers_own_refusal_repeats_no_part_of_the_url(tmp_path: Path, postgres_server: PgServer) -> None:
    """The server answers a bad `options=` with its value ('invalid command-line argument … hunter2')."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    url = f"{dsn}{'&' if '?' in dsn else '?'}options=hunter2"
    result = klaw_here(_postgres_home(tmp_path), "db", "info", env={VARIABLE: url})
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert VARIABLE in said and "hunter2" not in said and "Traceback" not in said


def test_commands_that_only_read_leave_a_database_klaw_never_set_up_as_it_is(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """adversary23: `klaw db info` on a database klaw never set up made klaw's tables there. A command that
    only reads says there is no klaw database yet and makes nothing, as do `klaw memory forget` (lows24,
    decision 450) and `klaw schedule add --inject-into` (no chat there yet); `klaw config check` finds
    nothing wrong (the engine's start would set it up) and makes nothing either (decision 442)."""
    import uuid

    import psycopg

    name = f"klaw_never_{uuid.uuid4().hex[:8]}"
    postgres_server.admin(f"CREATE DATABASE {name}")  # from template1: no klaw, no pgvector
    env = {VARIABLE: postgres_server.dsn(name)}
    home = _postgres_home(tmp_path)

    info = klaw_here(home, "db", "info", env=env)
    checked = klaw_here(home, "config", "check", env=env)
    # `klaw memory forget` writes, but has nothing to forget there: it says so too (decision 450). In this
    # process (typer's CliRunner): the words are the point, and it starts no engine.
    here = {"KLAW_HOME": str(home), "COLUMNS": "200", **env}
    forgot = CliRunner().invoke(app, ["memory", "forget", "exchange", "1", "--yes"], env=here)
    # `klaw memory list` and `search` only read: the same words, exit 1 (decision 467 keeps them).
    listed = CliRunner().invoke(app, ["memory", "list"], env=here)
    searched = CliRunner().invoke(app, ["memory", "search", "dog"], env=here)
    # `klaw schedule add --inject-into` reads the stored chats: none there, and nothing made either.
    scheduled = CliRunner().invoke(
        app, ["schedule", "add", "brief", "--every", "1h", "-m", "x", "--inject-into", "console:alice"], env=here
    )
    # `klaw mcp serve --chat` with no engine running set the home up (an engine's start) before it refused
    # the chat (adversary27 L1, decision 478).
    before = sorted(path.name for path in home.iterdir())
    served = klaw_here(home, "mcp", "serve", "--chat", "web:main", env=env)

    assert info.returncode == 0, info.stderr
    said = " ".join(info.stdout.split())
    assert said == f"no klaw database in the PostgreSQL database named by {VARIABLE} yet: `klaw serve` sets it up."
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert forgot.exception is None or isinstance(forgot.exception, SystemExit), forgot.exception
    assert (forgot.exit_code, " ".join(forgot.stderr.split())) == (1, f"error: {said[:-1]}"), forgot.stdout
    for command in (listed, searched):
        assert (command.exit_code, " ".join(command.stderr.split())) == (1, f"error: {said[:-1]}"), command.output
    assert scheduled.exception is None or isinstance(scheduled.exception, SystemExit), scheduled.exception
    assert scheduled.exit_code == 2
    assert "no chat console:alice has any messages (no chat has messages yet)" in " ".join(scheduled.stderr.split())
    assert served.returncode == 2
    assert "no chat web:main has any messages (no chat has messages yet)" in " ".join(served.stderr.split())
    assert sorted(path.name for path in home.iterdir()) == before
    with psycopg.connect(postgres_server.dsn(name)) as connection:
        made = connection.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
        ).fetchone()
        extensions = connection.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert made == (0,) and extensions == (0,)
    postgres_server.admin(f"DROP DATABASE {name} WITH (FORCE)")
