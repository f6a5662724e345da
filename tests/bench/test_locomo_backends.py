"""`klaw bench locomo --backend sqlite --backend postgres`: both backends' recall from one command, on
the same vectors (bench/locomo/backends.py), against a real PostgreSQL. Fails on the old code: there
was no --backend (the home's database.backend alone, one backend per run)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.pg_server import PgServer

FIXTURE = Path(__file__).parent.parent / "fixtures" / "locomo_tiny.json"


def bench_locomo(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`klaw bench locomo` on the tiny fixture, in this process (tests/cli/klaw_here.py), without the
    environment's KLAW_DATABASE_URL."""
    variables = {"KLAW__EMBEDDER__BACKEND": "fake", "KLAW__EMBEDDER__DIM": "32", **env}
    command = ["bench", "locomo", "--data", str(FIXTURE), "--out", str(tmp_path / "out")]
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("KLAW_DATABASE_URL", raising=False)
        return klaw_here(tmp_path / "home", *command, *args, env=variables)


def test_one_command_gives_both_backends_recall_side_by_side(tmp_path: Path, postgres_server: PgServer) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))

    result = bench_locomo(
        tmp_path, "--backend", "sqlite", "--backend", "postgres", "--url-env", "BENCH_PG", BENCH_PG=dsn
    )

    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "out" / "locomo.json").read_text(encoding="utf-8"))["backends"]
    assert list(figures) == ["sqlite", "postgres"]
    sqlite, postgres = figures["sqlite"], figures["postgres"]
    assert (sqlite["configuration"]["indexing"]["backend"], postgres["configuration"]["indexing"]["backend"]) == (
        "sqlite",
        "postgres",
    )
    assert sqlite["ingestion"]["embedded"] == postgres["ingestion"]["embedded"] == 7
    # The same vectors and exact KNN on both: the same figures (full text differs on this tiny fixture).
    assert sqlite["results"]["vector"]["all_categories"] == postgres["results"]["vector"]["all_categories"]
    markdown = (tmp_path / "out" / "locomo.md").read_text(encoding="utf-8")
    for variant in ("hybrid", "vector", "fts"):
        assert f"| {variant} | sqlite |" in markdown and f"| {variant} | postgres |" in markdown
    assert "On postgres:" in markdown


def test_an_unset_variable_or_a_wrong_backend_is_one_line(tmp_path: Path) -> None:
    unset = bench_locomo(tmp_path, "--backend", "postgres", "--url-env", "KLAW_NOT_SET_ANYWHERE")
    wrong = bench_locomo(tmp_path, "--backend", "mysql")

    assert unset.returncode == 2
    assert "postgres" in unset.stderr and "KLAW_NOT_SET_ANYWHERE" in unset.stderr
    assert wrong.returncode == 2 and "'mysql' is not a backend" in wrong.stderr
    for result in (unset, wrong):
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_backend_engine_yaml_chose_is_named_with_the_sqlite_way_out(tmp_path: Path) -> None:
    """No --backend on a PostgreSQL home whose variable this shell lacks: the error said only that the
    variable was not set (newcomer20, decision 489); it now says engine.yaml chose postgres and that
    `--backend sqlite` runs without it, which the test follows."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text("database:\n  backend: postgres\n  urlEnv: KLAW_NOT_SET_ANYWHERE\n")
    (home / "engine.yaml").chmod(0o600)

    unset = bench_locomo(tmp_path)

    said = " ".join(unset.stderr.split())
    assert unset.returncode == 2 and "KLAW_NOT_SET_ANYWHERE" in said, said
    assert f"the home's database.backend (postgres, {home / 'engine.yaml'})" in said, said
    assert "--backend sqlite" in said, said
    on_sqlite = bench_locomo(tmp_path, "--backend", "sqlite")
    assert on_sqlite.returncode == 0, on_sqlite.stderr
