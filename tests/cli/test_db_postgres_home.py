"""`klaw db info` on a PostgreSQL home, as a person runs it: a connection string it cannot use is named
by its variable, none of its parts (a password) shown, whether psycopg or the server repeats it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import klaw
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_DATABASE_URL"


def _postgres_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    assert klaw(home, "init").returncode == 0
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    return home


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
