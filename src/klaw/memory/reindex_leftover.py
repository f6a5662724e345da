"""What an interrupted `klaw reindex` left beside the database, said in one line when an engine starts.

A reindex killed outright (kill -9, a power cut) leaves its build `<klaw.db>.reindex` (with its SQLite
side files) and its lock file `<klaw.db>.reindex.lock`; Ctrl-C leaves the build. Nothing is broken: the
live database was never touched and the next `klaw reindex` resumes the build. But the files take disk
space and an engine started meanwhile would otherwise say nothing of them, so a person finds them
later with no idea what they are: the engine names them and the two ways out.
"""

from __future__ import annotations

import logging
from pathlib import Path

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


def warn_of_leftover_reindex(database: Path) -> None:
    """One warning naming what is left and what to type. Called once the engine holds the home, so a
    reindex cannot be running: `klaw reindex` holds the home for its whole run."""
    left = reindex_leftovers(database)
    if left:
        log.warning(
            "an interrupted 'klaw reindex' left %s in %s: stop the engine and run 'klaw reindex' to finish it"
            " (it resumes where it stopped), or delete those files to discard it",
            ", ".join(path.name for path in left),
            database.parent,
        )
