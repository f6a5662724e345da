"""`klaw bench turn --backend postgres` stopped by SIGTERM (`timeout`, systemd) or SIGHUP (a closed terminal)
drops its schema as at Ctrl-C (adversary22: only Ctrl-C did; the others left `klaw_bench_<pid>` and its
rows in the person's database), and a bench never takes over a schema of that name already there (it was
made with IF NOT EXISTS, then dropped). A real `klaw bench` process and the tests' real PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from klaw.bench.bench_store import bench_schema
from klaw.store.protocol import StorageError
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_BENCH_STOP_TEST_URL"
LEFTOVER = "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'klaw\\_bench\\_%'"


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
async def test_a_stopping_signal_drops_the_bench_schema(
    tmp_path: Path, postgres_server: PgServer, number: signal.Signals
) -> None:
    database = new_database(postgres_server)
    env = {**os.environ, "KLAW_HOME": str(tmp_path / "home"), VARIABLE: postgres_server.dsn(database)}
    args = ["bench", "turn", "--backend", "postgres", "--url-env", VARIABLE, "--stored", "5000", "--turns", "400"]
    bench = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", *args, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    made = f"SELECT count(*) FROM pg_namespace WHERE nspname = 'klaw_bench_{bench.pid}'"
    try:
        for _ in range(600):
            if postgres_server.psql(made, database).strip() == "1" or bench.returncode is not None:
                break
            await asyncio.sleep(0.1)
        assert postgres_server.psql(made, database).strip() == "1"
        await asyncio.sleep(1.0)  # into the fill
        bench.send_signal(number)
        _, err = await asyncio.wait_for(bench.communicate(), timeout=120)
    finally:
        if bench.returncode is None:
            bench.kill()
            await bench.wait()
    assert bench.returncode != 0
    assert b"Traceback" not in err, err.decode()[-2000:]
    assert postgres_server.psql(LEFTOVER, database).strip() == "0"


def test_a_schema_of_the_same_name_is_left_alone_and_earlier_ones_are_named(
    postgres_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    database = new_database(postgres_server)
    postgres_server.psql(
        f"CREATE SCHEMA klaw_bench_{os.getpid()}; CREATE TABLE klaw_bench_{os.getpid()}.theirs (x int);"
        " CREATE SCHEMA klaw_bench_1",
        database,
    )
    refused = rf"already holds a schema klaw_bench_{os.getpid()}"
    with pytest.raises(StorageError, match=refused), bench_schema(postgres_server.dsn(database)):
        pass
    assert postgres_server.psql(f"SELECT count(*) FROM klaw_bench_{os.getpid()}.theirs", database).strip() == "0"
    assert "klaw_bench_1" in caplog.text and "DROP SCHEMA" in caplog.text
