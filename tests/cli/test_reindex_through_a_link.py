"""`klaw reindex` in a home whose `database.path` is a symbolic link to a SQLite file elsewhere (decision 541:
one file by two names is one database, its lock taken beside the file the link resolves to). The reindex built
beside the link and swapped its new file in at the link's name: the link became a file of its own and the file
it named, which another home may use, was left as it was, so the homes sharing it parted silently (decision
544). The build and swap now happen at the resolved file. A real home, the real commands."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home


def test_a_reindex_through_a_link_rebuilds_the_file_it_names_and_keeps_the_link(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  path: {tmp_path / 'alias.db'}\n", encoding="utf-8"
    )
    database = shared / "klaw.db"
    sqlite3.connect(database).close()  # an empty file: the reindex fills it from the log
    (tmp_path / "alias.db").symlink_to(database)

    done = klaw_here(home, "reindex")

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "alias.db").is_symlink(), "the link was replaced by a file of its own"
    with sqlite3.connect(database) as connection:
        (count,) = connection.execute("SELECT count(*) FROM messages").fetchone()
    assert count == 6
    assert not list(tmp_path.glob("alias.db.*")), list(tmp_path.glob("alias.db.*"))
