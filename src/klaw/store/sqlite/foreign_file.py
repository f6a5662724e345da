"""Whether the SQLite file at `database.path` is klaw's, asked before klaw's own open touches it.

`database.path` may name another program's database by mistake (or a klaw.db a crash left empty): every
open set klaw up in whatever file it found, so `klaw db info` wrote klaw's 34 tables into another
program's database (adversary27 M5). Now a file without klaw's `schema_version` table is not set up
(`StoreNotSetUp`, as a PostgreSQL database without it already was, decision 467) for every open but the
engine's start; the start sets up an empty one, and refuses one holding tables that are not klaw's,
naming the path (decision 478). The look is a plain connection that loads nothing and creates nothing;
a file SQLite cannot read here is left to klaw's open, which words why.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from klaw.store.errors import StorageError, StoreNotSetUp


def _tables(path: Path, reading: bool) -> list[str] | None:
    """The file's tables' names, None when SQLite cannot read it here (not a database, locked, a full disk)."""
    flags = apsw.SQLITE_OPEN_READONLY if reading else apsw.SQLITE_OPEN_READWRITE
    try:
        connection = apsw.Connection(str(path), flags=flags)
    except apsw.Error:
        return None
    try:
        connection.setbusytimeout(5000)
        query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
        return [str(row[0]) for row in connection.execute(query)]
    except apsw.Error:
        return None
    finally:
        connection.close()


def not_klaws(path: Path, *, creating: bool, reading: bool = False) -> StorageError | None:
    """Why klaw's open must not go on at the existing file `path`, or None (klaw's own, or one to set up)."""
    tables = _tables(path, reading)
    if tables is None or "schema_version" in tables:
        return None
    if tables:
        count = f"{len(tables)} table{'s' if len(tables) != 1 else ''}"
        if creating:
            return StorageError(
                f"{path} is another program's database ({count}, none of them klaw's): klaw does not set itself"
                " up inside it. Point database.path in engine.yaml at a file of klaw's own (a new one is"
                " created when the engine starts)"
            )
        return StoreNotSetUp(
            f"{path} is not a klaw database ({count} of another program, none of klaw's): point database.path"
            " in engine.yaml at a file of klaw's own"
        )
    if creating:
        return None
    return StoreNotSetUp(f"{path} holds no klaw database yet: it is set up when the engine first starts")
