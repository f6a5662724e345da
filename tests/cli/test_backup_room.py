"""`klaw backup` onto a disk too small for it is refused before it writes (decision 536): it began, filled the
disk part-way (whatever else wrote there, the engine's own log, failing meanwhile) and ended in "cannot write
…". Each disk here is a tmpfs of its own (root only; skipped elsewhere)."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.own_disk import tmpfs


def test_an_archive_too_big_for_the_disk_is_refused_with_both_figures(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    (home / "workspace" / "photos.bin").write_bytes(os.urandom(30 << 20))  # does not compress
    with tmpfs(tmp_path / "small", "20m") as disk:
        refused = klaw_here(home, "backup", f"{disk}/")
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "cannot write" not in said and "Traceback" not in said
        assert re.search(r"the archive needs up to 31\.\d MB \(its files hold 31\.\d MB: compressed", said), said
        assert re.search(rf"and {disk} has 2\d\.\d MB free: free some space there, or back up onto another", said)
        assert "nothing was written" in said
        assert list(disk.iterdir()) == []
        (home / "workspace" / "photos.bin").write_bytes(os.urandom(8 << 20))  # one that fits goes through
        done = klaw_here(home, "backup", f"{disk}/")
        assert done.returncode == 0, done.stdout + done.stderr
        assert [path.suffix for path in disk.iterdir()] == [".tgz"]


def test_database_copies_too_big_for_the_disk_are_refused_before_they_are_made(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    with sqlite3.connect(home / "klaw.db") as database:  # 25 MB the online backup copies beside the archive
        database.execute("CREATE TABLE pad (data BLOB)")
        database.execute("INSERT INTO pad VALUES (randomblob(25000000))")
    database.close()
    with tmpfs(tmp_path / "small", "20m") as disk:
        refused = klaw_here(home, "backup", str(disk / "home.tgz"))
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert re.search(r"copies of the databases \(25\.\d MB\) are made beside the archive first, and", said), said
        assert list(disk.iterdir()) == []
