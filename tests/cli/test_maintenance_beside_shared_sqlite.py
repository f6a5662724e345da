"""`klaw reindex` and `klaw memory forget` in a home whose `database.path` names a SQLite file another home's
running engine uses (decision 536): they took only their own home's lock, so a reindex swapped the file under
the engine and a forget rewrote its rows. They are refused as a second engine is (decision 532), naming the
engine's home and how to stop it. Real `klaw engine` processes; the commands as typed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_init import initialise_home
from tests.cli.klaw_here import klaw_here
from tests.engine.test_engines_embedder_conflict import _sqlite_config


async def _engine(home: KlawHome) -> asyncio.subprocess.Process:
    engine = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", "engine", env={**os.environ, "KLAW_HOME": str(home.root)},
        stdout=asyncio.subprocess.DEVNULL, stderr=(home.root / "engine.err").open("wb"),
    )  # fmt: skip
    async with asyncio.timeout(120):
        while not home.socket_path.exists():
            assert engine.returncode is None, (home.root / "engine.err").read_text()
            await asyncio.sleep(0.05)
    return engine


async def test_maintenance_in_another_home_on_a_running_engines_sqlite_file_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "klaw.db"
    a, b, c, d = (KlawHome(tmp_path / name) for name in "abcd")
    for home, database in ((a, shared), (b, shared), (c, c.root / "klaw.db"), (d, c.root / "klaw.db")):
        initialise_home(home)
        _sqlite_config(home, database, 32)
    engines = [await _engine(a), await _engine(c)]
    try:
        for other, runs in ((b, a), (d, c)):  # a file outside both homes; the running home's own klaw.db
            before = os.stat(shared if runs is a else c.root / "klaw.db").st_ino
            reindex = await asyncio.to_thread(klaw_here, other.root, "reindex")
            said = " ".join(reindex.stderr.split())
            assert reindex.returncode == 1, reindex.stdout + reindex.stderr
            assert (
                f"`klaw engine` (pid {engines[0 if runs is a else 1].pid}) is running on the home {runs.root}" in said
            )
            assert "on the SQLite database this home's database.path names too: stop it first" in said, said
            assert "Traceback" not in said
            assert os.stat(shared if runs is a else c.root / "klaw.db").st_ino == before  # not swapped under it
            forget = await asyncio.to_thread(klaw_here, other.root, "memory", "forget", "exchange", "1", "--yes")
            said = " ".join(forget.stderr.split())
            assert forget.returncode == 1, forget.stdout + forget.stderr
            assert f"is running on the home {runs.root}, on the SQLite database" in said, said
            assert said.endswith("then run klaw memory forget again"), said
    finally:
        for engine in engines:
            engine.send_signal(signal.SIGTERM)
            await asyncio.wait_for(engine.wait(), 60)
    done = await asyncio.to_thread(klaw_here, b.root, "reindex")  # with the engine stopped, it runs
    assert done.returncode == 0, done.stdout + done.stderr
