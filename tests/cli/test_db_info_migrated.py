"""A command that opens a home made by an older klaw migrates its klaw.db, `klaw db info` included; it now says
so (newcomer12: "schema version 14" and no other word, where the home had been at 4, and the older klaw then
refused the file)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.store.shared.migrations import bundled_migrations
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.migrations import migrate
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here


async def _at_version(path: Path, version: int) -> None:
    """klaw.db as a klaw that knew only the first `version` migrations left it."""
    db = await SqliteDatabase.open(path)
    try:
        await db.run(lambda connection: migrate(connection, bundled_migrations("klaw.store.sqlite")[:version]))
    finally:
        await db.aclose()


def test_db_info_on_an_older_home_says_it_migrated_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    asyncio.run(_at_version(home / "klaw.db", 4))
    latest = len(bundled_migrations("klaw.store.sqlite"))

    first = klaw_here(home, "db", "info")
    said = " ".join(first.stderr.split())
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"{home / 'klaw.db'}: schema version 4 migrated to {latest} by this klaw" in said, said
    assert "an older klaw cannot open it any more" in said
    assert f"schema version {latest}" in first.stdout

    again = klaw_here(home, "db", "info")  # current now: nothing to say
    assert "migrated" not in again.stderr, again.stderr
