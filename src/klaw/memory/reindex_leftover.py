"""What an interrupted `klaw reindex` left behind, said in one line each when an engine starts and by
`klaw log check`.

A reindex killed outright (kill -9, a power cut) leaves its build `<klaw.db>.reindex` (with its SQLite
side files) and its lock file `<klaw.db>.reindex.lock`; Ctrl-C leaves the build. On PostgreSQL the build
is the schema `klaw_reindex` of the database (decision 171). Nothing is broken: the live database was
never touched and the next `klaw reindex` resumes the build. But the build takes disk space and an
engine started meanwhile would otherwise say nothing of it, so a person finds it later with no idea
what it is: the engine names it and the two ways out. Nothing is cleaned up here: the build is work a
rerun resumes, not litter a rerun replaces (decision 270).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from klaw.config import DatabaseConfig
from klaw.store.backend import rebuild_backend
from klaw.store.protocol import StorageError

log = logging.getLogger(__name__)

# The build, its SQLite side files, its saved vector copies (a folder) and the lock (memory/reindex.py).
LEFTOVER_SUFFIXES = (
    ".reindex",
    ".reindex-wal",
    ".reindex-shm",
    ".reindex-journal",
    ".reindex.vectors",
    ".reindex.lock",
)


def reindex_leftovers(database: Path) -> list[Path]:
    """The files an interrupted reindex of `database` left beside it (none: an empty list)."""
    return [path for suffix in LEFTOVER_SUFFIXES if (path := database.with_name(database.name + suffix)).exists()]


def leftover_reindex_notes(database: Path, config: DatabaseConfig) -> list[str]:
    """A line per thing an interrupted reindex left (none: an empty list): the files beside `database`,
    and on PostgreSQL the build schema, each with what to type. Blocking (PostgreSQL: one connection)."""
    notes = []
    left = reindex_leftovers(database)
    if [path.name for path in left] == [database.name + ".reindex.lock"]:
        # the lock alone: `klaw db migrate --to postgres` takes the same one (its build is in PostgreSQL)
        notes.append(
            f"an interrupted 'klaw reindex' or 'klaw db migrate --to postgres' left {left[0].name} in"
            f" {database.parent}: run the one that was interrupted again to finish it (it resumes where it"
            " stopped), or delete that file"
        )
    elif left:
        notes.append(
            f"an interrupted 'klaw reindex' left {', '.join(path.name for path in left)} in {database.parent}:"
            " stop the engine and run 'klaw reindex' to finish it (it resumes where it stopped), or delete those"
            " files to discard it"
        )
    if config.backend == "postgres":
        build = rebuild_backend(database, config)
        try:
            unfinished = build.exists()
        except StorageError:  # the server is away: what opening the store says, not this note's business
            unfinished = False
        if unfinished:
            notes.append(
                f"an interrupted 'klaw reindex' left its unfinished build, the {build.location} (unless a"
                " reindex of a home sharing that database is running now): stop every engine using the database"
                " and run 'klaw reindex' to finish it (it resumes where it stopped), or drop that schema"
                " (DROP SCHEMA ... CASCADE) to discard it"
            )
    return notes


async def warn_of_leftover_reindex(database: Path, config: DatabaseConfig) -> None:
    """One warning per leftover, naming it and what to type. Called once the engine holds the home and
    its store is open, so this home's reindex cannot be running (`klaw reindex` holds the home for its
    whole run) and the PostgreSQL server answers."""
    for note in await asyncio.to_thread(leftover_reindex_notes, database, config):
        log.warning("%s", note)
