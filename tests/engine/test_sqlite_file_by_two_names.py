"""One SQLite file reached by two names (decision 541, adversary33 item 2).

Home a's `database.path` named /X/shared/klaw.db, home b's /X/shared/alias.db, a symbolic link to it: both
engines started (two lock files, `alias.db.engine.lock` and `klaw.db.engine.lock`) and b re-bound
`index_meta` to dim 32 under a. The lock is now taken beside the file the name resolves to; a file with
other hard links (which no lock beside one name sees) is refused. `klaw reindex` goes through the same
function. Real `klaw engine` processes; the commands as typed."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_init import initialise_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_maintenance_beside_shared_sqlite import _engine
from tests.engine.test_engines_embedder_conflict import _sqlite_config


async def _refused(home: KlawHome) -> str:
    """Start an engine in `home` that must exit; what it said."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", "engine", env={**os.environ, "KLAW_HOME": str(home.root)},
        stdout=asyncio.subprocess.DEVNULL, stderr=(home.root / "engine.err").open("wb"),
    )  # fmt: skip
    if await asyncio.wait_for(process.wait(), 120) == 0 or home.socket_path.exists():
        raise AssertionError((home.root / "engine.err").read_text())
    return (home.root / "engine.err").read_text()


async def test_a_symbolic_link_to_a_running_engines_file_is_the_same_file(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    database = shared / "klaw.db"
    a, b, c, d = (KlawHome(tmp_path / name) for name in "abcd")
    for home, path, dim in ((a, database, 384), (b, shared / "alias.db", 32), (c, tmp_path / "via" / "klaw.db", 32)):
        initialise_home(home)
        _sqlite_config(home, path, dim)
    engine = await _engine(a)
    try:
        (shared / "alias.db").symlink_to(database)
        (tmp_path / "via").symlink_to(shared)  # a link to the folder
        for home in (b, c):
            said = await _refused(home)
            assert f"is running on the SQLite database {database} (database.path)" in said, said
            assert "one engine per SQLite database" in said and "Traceback" not in said, said
        assert sorted(path.name for path in shared.glob("*.engine.lock")) == ["klaw.db.engine.lock"]
        reindex = await asyncio.to_thread(klaw_here, b.root, "reindex")  # maintenance through the link too
        said = " ".join(reindex.stderr.split())
        assert reindex.returncode == 1 and f"is running on the home {a.root}" in said, reindex.stdout + said
        with sqlite3.connect(database) as connection:
            rows = connection.execute("SELECT DISTINCT embedder_id, dim FROM index_meta").fetchall()
        assert rows == [("fake-hash-384", 384)]
        os.link(database, tmp_path / "hard.db")  # a second name no lock beside the first sees
        initialise_home(d)
        _sqlite_config(d, tmp_path / "hard.db", 32)
        said = await _refused(d)
        assert f"the SQLite database {tmp_path / 'hard.db'} has 2 names (hard links)" in said, said
        assert "-samefile" in said and "Traceback" not in said, said
    finally:
        engine.send_signal(signal.SIGTERM)
        await asyncio.wait_for(engine.wait(), 60)
