"""`klaw bench scale --backend sqlite --backend postgres` as a person runs it: each size on both backends in
one run, the same figures from each, PostgreSQL's built in a schema of its own that is dropped after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_BENCH_TEST_DATABASE_URL"


def test_one_run_measures_sqlite_and_postgres_side_by_side(tmp_path: Path, postgres_server: PgServer) -> None:
    database = new_database(postgres_server)
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    home.config_file.write_text("embedder:\n  backend: fake\n  dim: 32\n")
    out = tmp_path / "scale.json"
    args = ["bench", "scale", "--backend", "sqlite", "--backend", "postgres", "--url-env", VARIABLE]
    args += ["--size", "300", "--queries", "3", "--past-segments", "2", "--reindex-size", "0", "--out", str(out)]
    env = {"KLAW_HOME": str(home.root), "COLUMNS": "250", VARIABLE: postgres_server.dsn(database)}

    result = CliRunner().invoke(app, args, env=env)

    assert result.exit_code == 0, result.output
    runs = json.loads(out.read_text("utf-8"))["search"]
    assert [(r["backend"], r["messages"]) for r in runs] == [("sqlite", 300), ("postgres", 300)]
    for run in runs:
        assert run["search_without_embedding"]["count"] == 3 and run["search_without_embedding"]["p50_ms"] > 0
        assert run["past_conversations"]["count"] == 3 and run["past_shown_per_query"] > 0
        assert run["recalled_per_query"] > 0
        assert run["recall_at_20"] == 1.0  # both exact at this size
        assert run["scanned_bytes_per_query"] > 0
    sqlite, postgres = runs
    assert sqlite["reload_first_search_ms"] > 0 and postgres["reload_first_search_ms"] is None
    assert "300 messages on postgres" in result.output
    assert "auto-RAG p50 without query embedding on PostgreSQL is" in result.output
    leftover = postgres_server.psql("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'klaw_bench_%'", database)
    assert leftover.strip() == "0"  # the bench schema was dropped


def test_an_unknown_backend_or_unset_variable_is_named_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    home.config_file.write_text("embedder:\n  backend: fake\n  dim: 32\n")
    monkeypatch.delenv(VARIABLE, raising=False)
    env = {"KLAW_HOME": str(home.root), "COLUMNS": "250"}
    base = ["bench", "scale", "--size", "100", "--queries", "1", "--past-segments", "1", "--reindex-size", "0"]

    mysql = CliRunner().invoke(app, [*base, "--backend", "mysql"], env=env)
    unset = CliRunner().invoke(app, [*base, "--backend", "postgres", "--url-env", VARIABLE], env=env)

    assert mysql.exit_code == 2 and "'mysql' is not a backend: use sqlite or postgres" in mysql.output
    assert unset.exit_code == 1 and f"the environment variable {VARIABLE}" in unset.output
    assert "Traceback" not in mysql.output + unset.output
