"""The klaw.db `klaw db migrate` leaves in a home it moved into PostgreSQL, as a forget there reaches it
(decision 539): whether it holds any of the records a forget erased, read without writing, and the file
with every side file of it removed (its WAL and journal hold pages of the same text, its `.vectors/`
quantized vectors of it, its `.floats` the float vectors of decision 534)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Collection
from pathlib import Path

import apsw

SIDE_FILES = ("-wal", "-shm", "-journal", "-migrating", ".floats", ".floats-rowids")  # float vectors: 534, 544


def holds_any(path: Path, record_ids: Collection[str]) -> bool:
    """Whether the SQLite file `path` holds a message of `record_ids`. A file that cannot be read as klaw's
    (damaged, another program's) is taken to hold them: a forget must not leave what it cannot look into."""
    if not path.is_file():
        return False
    try:
        connection = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return True
    try:
        row = connection.execute(
            "SELECT 1 FROM messages WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1",
            (json.dumps(sorted(record_ids)),),
        ).fetchone()
        return row is not None
    except apsw.Error:
        return True
    finally:
        connection.close()


def remove_copy(path: Path) -> None:
    """Delete the SQLite file `path`, its side files and its saved vectors (`<file>.vectors/`)."""
    for suffix in ("", *SIDE_FILES):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()
    shutil.rmtree(Path(f"{path}.vectors"), ignore_errors=True)
