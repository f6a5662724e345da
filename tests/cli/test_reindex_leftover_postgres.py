"""A `klaw reindex` on PostgreSQL interrupted midway leaves its build, the schema `klaw_reindex` of the
database (decision 171). Before, nothing said so: an engine started silently and `klaw log check` was
quiet, so the schema stayed with nothing saying what it was. Now both name it and the two ways out, and
`klaw reindex` run again resumes it and leaves no schema behind (decision 270)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from klaw.config_loader import load_config
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.reindex import ReindexStage, reindex
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.conftest import new_database
from tests.engine import harness
from tests.engine.harness import engine_config
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"
SAID = "an interrupted 'klaw reindex' left its unfinished build, the schema klaw_reindex"


class Interrupted(Exception):
    """What Ctrl-C does to a reindex between its rebuild and its embedding."""


def _stop_when_embedding_starts(stage: ReindexStage, done: int, total: int) -> None:
    if stage is ReindexStage.EMBED:
        raise Interrupted


def _build_schemas(server: PgServer, database: str) -> str:
    return server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'klaw_reindex'", database).strip()


async def test_a_left_build_schema_is_named_at_start_and_by_log_check_and_a_rerun_finishes_it(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    database = new_database(postgres_server)
    dsn = postgres_server.dsn(database)
    monkeypatch.setenv(VARIABLE, dsn)
    home = await asyncio.to_thread(a_home, tmp_path)  # it runs a loop of its own
    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, "--samples", "0")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    quiet = klaw_here(home, "log", "check")
    assert quiet.returncode == 0 and "klaw_reindex" not in quiet.stdout, quiet.stdout + quiet.stderr

    with pytest.raises(Interrupted):
        await reindex(KlawHome(home), load_config(home / "engine.yaml").config, progress=_stop_when_embedding_starts)
    assert _build_schemas(postgres_server, database) == "1"

    checked = klaw_here(home, "log", "check")
    out = " ".join(checked.stdout.split())
    assert checked.returncode == 0, checked.stdout + checked.stderr  # the log itself is whole
    assert f"{SAID} of the PostgreSQL database named by {VARIABLE}" in out, out
    assert "run 'klaw reindex' to finish it (it resumes where it stopped)" in out and "DROP SCHEMA" in out, out

    monkeypatch.setattr(harness, "DATABASE", {"backend": "postgres", "urlEnv": VARIABLE})
    caplog.set_level(logging.WARNING)
    async with FakeOpenAiServer() as server:
        engine = await Engine.start(KlawHome(home), engine_config(server.base_url), listen=False)
        await engine.shutdown(timeout_seconds=5)
    [warning] = [r.getMessage() for r in caplog.records if SAID in r.getMessage()]
    assert VARIABLE in warning and "stop every engine using the database" in warning
    assert dsn not in warning

    rerun = await asyncio.to_thread(klaw_here, home, "reindex")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "(1 done by an earlier run)" in rerun.stdout  # resumed, not started over
    assert _build_schemas(postgres_server, database) == "0"
    after = klaw_here(home, "log", "check")
    assert after.returncode == 0 and "klaw_reindex" not in after.stdout, after.stdout
