"""What a `klaw backup` archive says of itself: its first member, `klaw-backup.json` (home_backup.py), read
and judged before anything is written (home_restore.py, decisions 522 and 531).

The manifest is the archive's word, and an archive can be crafted: its database member was joined to the
restored folder as written (`../../vh/klaw.db` opened another home's klaw.db), its packages were printed as
a command to paste (`requests; curl …|sh`), its `format` taken whatever it was. Here a database member must
be a plain relative name below the home (check_archive then finds it among the members), a package a PEP 508
name (the others kept apart, for the report to name), a format 1 or more and not newer than this klaw's.
"""

from __future__ import annotations

import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from klaw.home_backup import FORMAT, MANIFEST
from klaw.terminal_text import one_line

PACKAGE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,200}[A-Za-z0-9])?")  # PEP 508's name, nothing after it
_PIECE = 1 << 20


@dataclass
class ArchiveFacts:
    """What the archive says of itself (`klaw-backup.json`); format 0: made before that file existed."""

    format: int
    made: str = ""
    klaw: str = ""
    database: str | None = "klaw.db"  # its member; None: on PostgreSQL, not in the archive
    postgres: bool = False
    sandbox_packages: list[str] = field(default_factory=list)  # package names only (`PACKAGE`)
    odd_packages: list[str] = field(default_factory=list)  # what the manifest lists that is no package name
    files: int = 0
    bytes: int = 0
    links: bool = False  # it holds a symbolic link: each member's real path is checked as it is written
    disk: int = 0  # what restoring it writes to disk: each file's data (a sparse one's holes not), a block each


def read_manifest(archive: Path, first: tarfile.TarInfo, stream: tarfile.TarFile) -> ArchiveFacts:
    """The archive's own description, from its first member (format 0 when that is not `klaw-backup.json`)."""
    from klaw.home_restore import RestoreError

    if first.name != MANIFEST:
        return ArchiveFacts(format=0)
    data = stream.extractfile(first) if first.isreg() and first.size < _PIECE else None
    try:
        record = json.loads(data.read()) if data is not None else None
        version = record["format"] if isinstance(record, dict) else None
    except (ValueError, KeyError):
        version = None
    if not isinstance(record, dict) or not isinstance(version, int) or isinstance(version, bool):
        raise RestoreError(f"{archive}'s {MANIFEST} is not one klaw wrote: not restored, nothing was written")
    if version < 1:  # format 0 is an archive without this file, never one that says so
        raise RestoreError(
            f"{archive}'s {MANIFEST} is not one klaw wrote (format {version}): not restored, nothing was written"
        )
    if version > FORMAT:
        raise RestoreError(
            f"{archive} was made by a newer klaw ({one_line(str(record.get('klaw', '?')))[:40]}, backup format"
            f" {version}; this klaw reads format {FORMAT} and older): upgrade klaw, then restore; nothing was written"
        )
    database = record.get("database")
    if database is not None and not _below(database):
        raise RestoreError(
            f"{archive}'s {MANIFEST} names its database {one_line(str(database))[:200]!r}, which is not a member"
            " below the home: not one klaw wrote, nothing was written"
        )
    packages = record.get("sandboxPackages")
    named = [str(name) for name in packages] if isinstance(packages, list) else []
    return ArchiveFacts(
        format=version,
        made=str(record.get("made", "")),
        klaw=str(record.get("klaw", "")),
        database=database,
        postgres=record.get("postgres") is True,
        sandbox_packages=[name for name in named if PACKAGE.fullmatch(name)],
        odd_packages=[name for name in named if not PACKAGE.fullmatch(name)],
    )


def _below(name: object) -> bool:
    """`name` is a member name klaw writes: relative, no `..`, no empty or `.` part (decision 531: a manifest's
    `../../vh/klaw.db` made the check open another home's database outside the archive)."""
    return (
        isinstance(name, str)
        and bool(name)
        and not name.startswith("/")
        and all(part not in ("", ".", "..") for part in name.split("/"))
    )
