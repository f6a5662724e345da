"""`klaw db info` on a PostgreSQL home, as a person runs it: it says what the home's database is (the
server named by its variable, never the connection string), and a connection string it cannot use is
named by its variable, none of its parts (a password) shown, whether psycopg or the server repeats it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.inited_home import init_home
from tests.cli.test_cli import klaw
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
    info = klaw(home, "db", "info", env={VARIABLE: dsn})
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
    result = klaw(_postgres_home(tmp_path), "db", "info", env={VARIABLE: url})
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert VARIABLE in said and "Traceback" not in said
    assert "hunter2" not in said and url not in said


def test_the_servers_own_refusal_repeats_no_part_of_the_url(tmp_path: Path, postgres_server: PgServer) -> None:
    """The server answers a bad `options=` with its value ('invalid command-line argument … hunter2')."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    url = f"{dsn}{'&' if '?' in dsn else '?'}options=hunter2"
    result = klaw(_postgres_home(tmp_path), "db", "info", env={VARIABLE: url})
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert VARIABLE in said and "hunter2" not in said and "Traceback" not in said
