"""Replacing a file so that a crash leaves either the old or the new content, never half of either.

Used where klaw rewrites a file in place (core memory, conversation-log files after `/forget`): the
new content goes to a sibling temporary file, is fsync'd, renamed over the old file (atomic on
POSIX), and the folder is fsync'd so the rename itself survives a power cut.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from klaw.private_files import private_dirs


def replace_file(path: Path, data: bytes, *, new_file_mode: int = 0o600) -> None:
    """Atomically give `path` the content `data`, keeping its permission bits (or `new_file_mode`)."""
    replace_file_by(path, lambda handle: handle.write(data), new_file_mode=new_file_mode)


def replace_file_by(path: Path, write: Callable[[BinaryIO], object], *, new_file_mode: int = 0o600) -> None:
    """`replace_file` with the content written by `write` into the new file, a piece at a time (a log
    file rewritten without holding it whole: decision 329)."""
    private_dirs(path.parent)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = new_file_mode
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def replace_at(folder: int, name: str, data: bytes, like: os.stat_result) -> None:
    """Give the file `name` in the open `folder` the content `data` by a sibling temporary file renamed
    over it, with `like`'s permission bits and (where allowed) owner: a write that fails (a full disk)
    leaves the old file whole, where truncating it first left it empty (adversary13). Only the
    temporary file klaw made is ever removed, and only when the write failed."""
    temporary = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, stat.S_IMODE(like.st_mode))
            with contextlib.suppress(PermissionError):  # an ordinary user cannot give a file away: kept as theirs
                os.fchown(fd, like.st_uid, like.st_gid)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
    os.fsync(folder)


def fsync_dir(directory: Path) -> None:
    """Make a file created, renamed or removed in `directory` survive a power cut (its entry lives in
    the folder, which has to be fsync'd too): here after the rename, and after the conversation log
    creates a day file."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def append_whole(fd: int, payload: bytes, size: int) -> None:
    """Write all of `payload` at the end of the append-mode `fd` and fsync, or leave the file at `size`
    bytes: a write cut short (a full disk) is truncated away, so no torn line is left for the next
    append or a retry to land after. Used by the conversation log and the gateway's buffer."""
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):  # shrinking needs no space
            os.ftruncate(fd, size)
            os.fsync(fd)
        raise


def kept_copy_name(target: Path, kind: str = "bak") -> Path:
    """`<name>.bak-<UTC time>` beside `target` (a number after it when one of the same second is there): the
    copies `klaw init --force` and `klaw reindex --keep-backup` keep, which no later run removes (395, 396);
    `kind` "broken": an engine.yaml that did not load, set aside by `init --force` (decision 500)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    kept, number = target.with_name(f"{target.name}.{kind}-{stamp}"), 1
    while kept.exists():
        number += 1
        kept = target.with_name(f"{target.name}.{kind}-{stamp}-{number}")
    return kept
