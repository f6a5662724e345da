"""The folder of a SQLite file kept outside the home (decision 541 section 3, adversary33 item 3).

Decision 532 said such a folder "is made 0700, as a home is"; it stayed 0755. The rule now written down: a
folder klaw creates for the file is 0700, a folder that was there is left as it was (it may hold the person's
other files, or be shared on purpose), and what klaw writes in it (klaw.db, its -wal/-shm, the file's lock) is
0600. A real program with the usual umask 022 opens `Klaw(home)` on each and closes it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

PROGRAM = r"""
import asyncio, os, sys

os.umask(0o022)
from klaw import Klaw


async def main(home, database):
    config = {
        "models": {"fake/x": {"baseUrl": "http://127.0.0.1:9/v1", "maxRetries": 0}},
        "routing": {"default": "fake/x"},
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "database": {"path": database},
    }
    async with Klaw(home, config=config):
        pass


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


async def test_a_folder_klaw_makes_is_private_and_one_it_found_is_left_as_it_was(tmp_path: Path) -> None:
    existing = tmp_path / "data"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    (existing / "notes.txt").write_text("the person's own file\n")
    made = tmp_path / "new" / "deeper"
    for home, database in ((tmp_path / "a", existing / "klaw.db"), (tmp_path / "b", made / "klaw.db")):
        program = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PROGRAM, str(home), str(database),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(program.communicate(), 120)
        assert program.returncode == 0, (out + err).decode()
        assert database.is_file()
        written = [path for path in database.parent.iterdir() if path.name.startswith("klaw.db")]
        assert database.with_name("klaw.db.engine.lock") in written
        assert {path.name: _mode(path) for path in written} == {path.name: 0o600 for path in written}
    assert _mode(existing) == 0o755  # the person's folder, as it was
    assert _mode(made) == 0o700 and _mode(made.parent) == 0o700  # every folder klaw made
