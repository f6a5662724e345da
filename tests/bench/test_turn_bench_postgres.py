"""`klaw bench turn --backend sqlite --backend postgres` as a person runs it: each size through a real engine on
both backends in one run, the same phases from each side by side, PostgreSQL's tables made in a schema of their
own that is dropped after, even when the bench fails part-way; a person's own tables are never touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.engine.runtime import Engine
from tests.bench.test_turn_bench import TURN_PHASES
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_BENCH_TEST_DATABASE_URL"
LEFTOVER = "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'klaw_bench_%'"
ROWS_ESTIMATE = "SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass"
OWN = (
    "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public';"
    " SELECT count(*) FROM public.messages; SELECT count(*) FROM public.log_records"
)


def _args(out: Path) -> list[str]:
    args = ["bench", "turn", "--backend", "sqlite", "--backend", "postgres", "--url-env", VARIABLE]
    return [*args, "--stored", "120", "--turns", "3", "--chats", "2", "--chat-turns", "1", "--out", str(out)]


def test_one_run_times_a_turn_on_sqlite_and_postgres_side_by_side(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its output into a pipe (no COLUMNS, not a terminal), where rich's 80 columns cut the side-by-side
    table's headers and names ("postgres/s…", "system_…": newcomer15): the tables are printed whole."""
    monkeypatch.delenv("COLUMNS", raising=False)
    database = new_database(postgres_server)
    postgres_server.psql("CREATE TABLE public.mine (note text); INSERT INTO public.mine VALUES ('kept')", database)
    own = postgres_server.psql(OWN, database)
    out = tmp_path / "turn.json"
    env = {"KLAW_HOME": str(tmp_path / "home"), VARIABLE: postgres_server.dsn(database)}

    result = CliRunner().invoke(app, _args(out), env=env)

    assert result.exit_code == 0, result.output
    runs = json.loads(out.read_text("utf-8"))["results"]
    assert [(r["backend"], r["stored_messages"]) for r in runs] == [("sqlite", 120), ("postgres", 120)]
    for run in runs:
        assert run["turn"]["count"] == 3 and run["turn"]["p50_ms"] > 0
        assert all(run["phases"][name]["count"] == 3 for name in TURN_PHASES)
        assert run["concurrent_turns"] == 2 and run["turns_per_second"] > 0 and run["cpu_ms_per_turn"] > 0
    assert runs[0].keys() == runs[1].keys()  # the same figures from each
    assert "sqlite, 120 stored messages: turn" in result.output
    assert "postgres, 120 stored messages: turn" in result.output
    assert "postgres: turn phases at 120 stored messages" in result.output
    assert "turn phases at 120 stored messages (ms): sqlite vs postgres" in result.output
    assert "postgres/sqlite p50" in result.output
    assert "…" not in result.output and "system_prompt" in result.output, result.output  # nothing cut
    assert postgres_server.psql(LEFTOVER, database).strip() == "0"  # the bench schema was dropped
    assert postgres_server.psql(OWN, database) == own  # a person's own tables (a klaw home's too) untouched
    assert postgres_server.psql("SELECT note FROM public.mine", database).strip() == "kept"


def test_the_schema_is_dropped_when_the_bench_fails_part_way(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import klaw.bench.turn_bench as turn_bench

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # as Ctrl-C during the fill

    monkeypatch.setattr(turn_bench, "_fill", broken)
    database = new_database(postgres_server)
    env = {"KLAW_HOME": str(tmp_path / "home"), VARIABLE: postgres_server.dsn(database)}
    args = ["bench", "turn", "--backend", "postgres", "--url-env", VARIABLE, "--stored", "10", "--turns", "1"]

    result = CliRunner().invoke(app, args, env=env)

    assert result.exit_code != 0
    assert postgres_server.psql(LEFTOVER, database).strip() == "0"


def test_an_unknown_backend_or_unset_variable_is_named_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    env = {"KLAW_HOME": str(tmp_path / "home"), "COLUMNS": "250"}
    base = ["bench", "turn", "--stored", "10", "--turns", "1"]

    mysql = CliRunner().invoke(app, [*base, "--backend", "mysql"], env=env)
    unset = CliRunner().invoke(app, [*base, "--backend", "postgres", "--url-env", VARIABLE], env=env)

    assert mysql.exit_code == 2 and "'mysql' is not a backend: use sqlite or postgres" in mysql.output
    assert unset.exit_code == 1 and f"the environment variable {VARIABLE}" in unset.output
    assert "Traceback" not in mysql.output + unset.output


async def test_the_turns_run_on_tables_the_planner_has_statistics_of(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat filled in bulk and never analysed is taken for empty: its searches then read whole segments
    (decision 424). The bench gathers the statistics after the fill, as autovacuum does in a running home."""
    import klaw.bench.turn_bench as turn_bench
    from klaw.bench.bench_store import engine_database
    from klaw.config import DatabaseConfig
    from klaw.store.postgres.connection import fetch_value

    seen: list[float] = []
    round_trips = turn_bench._round_trips

    async def observed(engine: Engine, count: int) -> list[float]:
        async with engine.store.db.connection() as connection:  # type: ignore[attr-defined]
            seen.append(
                await fetch_value(connection, "SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass")
            )
        return await round_trips(engine, count)

    monkeypatch.setattr(turn_bench, "_round_trips", observed)
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    database = DatabaseConfig.model_validate({"backend": "postgres", "urlEnv": VARIABLE})
    with engine_database(database) as engine_db:
        result = await turn_bench.measure_turns(
            tmp_path / "home", stored=300, turns=2, concurrent_chats=1, turns_per_chat=1, database=engine_db
        )

    assert result.backend == "postgres"
    assert seen and seen[0] >= 300  # analysed: -1 when never
