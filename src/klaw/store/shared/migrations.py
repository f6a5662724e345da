"""Numbered schema migrations, read alike for both backends: files `NNNN_description.sql` in a
backend's `migrations/` folder, numbered 1..n without gaps, each applied once and recorded in
`schema_version` by the backend's runner (its transaction and locking are its own)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources

from klaw.store.protocol import StorageError

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def bundled_migrations(package: str) -> list[Migration]:
    """The migrations shipped in `package`'s `migrations/` folder, oldest first."""
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StorageError(f"migration numbers must run 1..n without gaps, found {versions}")
    return found


def pending(migrations: list[Migration], version: int) -> list[Migration]:
    """The migrations a database at `version` still needs; a database newer than every migration this
    klaw knows is refused, not damaged by old code."""
    newest = migrations[-1].version if migrations else 0
    if version > newest:
        raise StorageError(
            f"the database is at schema version {version} but this klaw knows only {newest}: upgrade klaw"
        )
    return [migration for migration in migrations if migration.version > version]


@dataclass(frozen=True)
class SchemaMove:
    """What a backend's `migrate` did: the version it found once it held the migration lock (so of two
    processes opening one store at once, only the one that migrated sees the old version) and the
    version it left."""

    before: int
    after: int


def said_migrated(where: str, move: SchemaMove) -> None:
    """One line when opening a store moved an existing schema forward (not a new store's first schema): any
    command opening it migrates, `klaw db info` included, and an older klaw cannot open it afterwards
    (newcomer12 found out from the older klaw's refusal). Logged once: the next opening finds it current,
    and of two openings at once the second waits for the first's lock and finds nothing to do."""
    before, after = move.before, move.after
    if 0 < before < after:
        log.warning(
            "%s: schema version %d migrated to %d by this klaw; an older klaw cannot open it any more"
            " (docs/maintenance.md: back up before upgrading)",
            where,
            before,
            after,
        )
