"""`klaw restore ARCHIVE`: a `klaw backup` archive made a working home again, or refused whole (decision 522).

The way back was `mkdir -m 700 NEW && tar xzf X -C NEW`: it trusted the archive (tar follows a member
`../x` or a link out of the folder only with care a person must remember), wrote over a home that held
data, made files with the archive's modes, and said nothing about whether the result worked. Here:

- The target is refused first, before the archive is read: an engine running on it (its lock is held)
  or anything in it (a home, even one `klaw init` made) is named with what to do instead: `--home` to a
  new folder, or move the home aside once klaw is stopped. Only a missing or empty folder is restored into.
- The archive is read through once before anything is written: its first member is `klaw-backup.json`
  (home_backup.py) with a format this klaw knows (an archive from before that file, 512's, is taken when
  it holds engine.yaml at its top); every member is a file, folder or link below the home (no absolute
  name, no `..`, no link leading out, no device, none written twice or through an earlier member's link, a
  hard link only to a file before it, no name part over 255 bytes: decision 531); every byte is
  decompressed to the end, so a cut or damaged archive is named as such (gzip checks its CRC and length
  there) before a file is made. What `klaw-backup.json` says is judged in restore_manifest.py.
- It is then extracted into a hidden folder beside the target (0700: nothing in it is reachable by
  others meanwhile), folders 0700 and files 0600 (0700 when the owner could run them) whatever the
  archive or the umask say, each file's time kept (the first start stores log lines newer than the
  database's watermark). Each member's real path is checked a second time as it is written
  (restore_extract.py: tarfile's `data` filter where this Python has it, klaw's same check on 3.11.0–3.11.3).
- The hidden folder is checked as klaw reads a home (restore_check.py): klaw.db opens as the engine
  opens it, the log is read by `klaw log check`'s reader, scheduler.db's tasks are listed. Only then is it
  renamed to the target, in one step: a refusal, a damaged database or a crash leaves no half-made home
  (a crash may leave the hidden folder, `.NAME.restoring-…`: locked while its restore lives, the next
  restore into the same place removes it, saying so, and refuses while a live one holds it: restore_staging.py).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import posixpath
import shutil
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from klaw.errors import KlawError
from klaw.home_backup import MANIFEST
from klaw.home_lock import holder_of
from klaw.private_files import private_dirs
from klaw.restore_extract import write_private
from klaw.restore_manifest import ArchiveFacts, read_manifest
from klaw.restore_staging import Notice, staging_folder, under_way

Progress = Callable[[str, int, int], None]  # (stage: "checking" or "restoring", bytes read, bytes in all)
_PIECE = 1 << 20
_DISK_BLOCK = 4096
DISK_MARGIN = 100 * 10**6  # left free beside the restored home (decision 524)
_NAME_MAX = 255  # bytes in one part of a file's name (Linux, macOS)
_DAMAGE = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError)


class RestoreError(KlawError, RuntimeError):
    """The archive cannot be restored there; the message says why and what to do. Nothing was written."""


@dataclass
class RestoreReport:
    target: Path
    facts: ArchiveFacts
    counts: Any = None  # restore_check.RestoredCounts


def restore(
    archive: Path, target: Path, *, progress: Progress | None = None, notice: Notice | None = None
) -> RestoreReport:
    """Restore the `klaw backup` archive `archive` as the home `target` (missing or an empty folder), or raise
    `RestoreError` with nothing written. `notice` hears of a crashed restore's folder removed. Blocking: run it
    in a thread."""
    refuse_target(target, archive)
    facts = check_archive(archive, progress)
    private_dirs(target.parent)
    with staging_folder(target, _remove_tree, notice) as staging:  # a crashed restore's folder removed first
        return _restore_into(archive, target, facts, staging, progress)


def _restore_into(
    archive: Path, target: Path, facts: ArchiveFacts, staging: Path, progress: Progress | None
) -> RestoreReport:
    """The disk's room checked, then unpacked into `staging`, checked, renamed to `target`; `staging` removed on
    any failure."""
    from klaw.restore_check import check_restored  # the store and the log's reader: not for `klaw --help`

    try:
        _refuse_full_disk(archive, target, facts)
        _extract(archive, staging, progress, links=facts.links)
        counts = check_restored(staging, facts.database)
        try:
            os.rename(staging, target)  # an empty folder is replaced; one written to meanwhile is not
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):  # a mount point, another user's folder
                raise RestoreError(
                    f"the restored home cannot be put at {target} ({exc.strerror}): nothing was restored;"
                    f" name a new folder (klaw restore {archive} --home NEW_FOLDER)"
                ) from None
            raise RestoreError(
                f"{target} was written to while the archive was restored: nothing was restored; run klaw restore"
                " again into a new folder"
            ) from None
    except BaseException:
        _remove_tree(staging)
        raise
    return RestoreReport(target=target, facts=facts, counts=counts)


def _remove_tree(top: Path) -> None:
    """`top` and all it holds, by a stack: shutil.rmtree recurses once per level, and a restored folder 1,100
    deep raised RecursionError instead of being removed (decision 524). What cannot be removed is left."""
    stack: list[tuple[str, bool]] = [(str(top), False)]
    while stack:
        path, emptied = stack.pop()
        try:
            if emptied:
                os.rmdir(path)
                continue
            stack.append((path, True))
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, False))
                    else:
                        os.unlink(entry.path)
        except OSError:
            continue


def _data(member: tarfile.TarInfo) -> int:
    """A file member's data: a sparse file's extents, not its holes (what `klaw backup` counted, decision 528)."""
    regions: list[tuple[int, int]] | None = member.sparse  # type: ignore[assignment]  # typeshed says int
    return sum(length for _, length in regions) if regions is not None else member.size


def _on_disk(member: tarfile.TarInfo) -> int:
    """About what writing `member` takes on disk: its data (a sparse file's extents, not its holes), rounded
    up to 4 KiB blocks, and a block for its entry."""
    data = _data(member)
    return -(-data // _DISK_BLOCK) * _DISK_BLOCK + _DISK_BLOCK if member.isreg() else _DISK_BLOCK


def _refuse_full_disk(archive: Path, target: Path, facts: ArchiveFacts) -> None:
    """`RestoreError` when the disk of `target` has not room for the restored home and `DISK_MARGIN` beside it:
    a restore that filled the disk would stop whatever else writes there (klaw itself, the system's logs)."""
    free = shutil.disk_usage(target.parent).free
    if facts.disk + DISK_MARGIN > free:
        raise RestoreError(
            f"the restored home needs about {facts.disk / 1e6:,.1f} MB and {DISK_MARGIN // 10**6} MB to spare, and"
            f" {target.parent} has {free / 1e6:,.1f} MB free: free some space there, or restore onto another disk"
            f" (klaw restore {archive} --home NEW_FOLDER); nothing was written"
        )


def refuse_target(target: Path, archive: Path) -> None:
    """`RestoreError` when `target` may not become the restored home: an engine runs on it, or it holds
    anything (named, with what to do instead)."""
    elsewhere = f"klaw restore {archive} --home NEW_FOLDER"
    restoring = under_way(target)
    if restoring is not None:
        raise RestoreError(
            f"another klaw restore into {target} is under way (a running process holds its folder {restoring}):"
            f" wait for it to end, or restore into another folder ({elsewhere}); nothing was written"
        )
    holder = holder_of(target) if target.is_dir() else None
    if holder is not None:
        raise RestoreError(
            f"{holder.describe()} is running on {target}: a restore never writes over a home in use. Restore"
            f" into a new folder ({elsewhere}), or stop klaw first and move {target} aside"
            f" (mv {target} {target}.old); nothing was written"
        )
    if target.exists() and not target.is_dir():
        raise RestoreError(f"{target} is a file, not a folder: name a new folder ({elsewhere}); nothing was written")
    try:
        held = sorted(entry.name for entry in target.iterdir()) if target.is_dir() else []
    except PermissionError:
        raise RestoreError(
            f"{target} cannot be read: name a folder of yours ({elsewhere}); nothing was written"
        ) from None
    if held:
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        raise RestoreError(
            f"{target} holds a home or other files already ({shown}): a restore never writes over them."
            f" Restore into a new folder ({elsewhere}), or, with klaw stopped, move this one aside"
            f" (mv {target} {target}.old) and run klaw restore again; nothing was written"
        )


def check_archive(archive: Path, progress: Progress | None = None) -> ArchiveFacts:
    """Read `archive` through: a klaw backup of a known format, every member confined to the home, every
    byte there (`RestoreError` naming what is wrong otherwise). Writes nothing."""
    facts: ArchiveFacts | None = None
    seen = _Seen()
    with _opened(archive, "checking", progress) as (members, stream):
        for member in members:
            if facts is None:
                facts = read_manifest(archive, member, stream)
                if member.name == MANIFEST:
                    continue
            _confined(archive, member, seen)
            if member.isreg() and member.sparse is None:  # a sparse member's data is read past all the same
                data = stream.extractfile(member)
                assert data is not None
                while data.read(_PIECE):
                    pass
            facts.files += 1
            facts.links = facts.links or member.issym()
            facts.disk += _on_disk(member)
            facts.bytes += _data(member) if member.isreg() else 0
    if facts is None:
        raise RestoreError(f"{archive} is an empty archive, not a klaw backup: nothing was written")
    names = seen.names
    if facts.format > 0 and facts.database is not None and facts.database not in seen.files:
        raise RestoreError(
            f"{archive}'s {MANIFEST} names its database {facts.database!r}, which is not a file in the archive:"
            " not one klaw wrote, nothing was written"
        )
    if facts.format == 0 and "engine.yaml" not in names:
        first = ", ".join(sorted(names)[:3])
        raise RestoreError(
            f"{archive} is not a klaw backup: it has no {MANIFEST} and no engine.yaml at its top (it holds {first}…)."
            " klaw restore takes what `klaw backup` writes; nothing was written"
        )
    if facts.format == 0:
        facts.database = "klaw.db" if "klaw.db" in names else None
    return facts


@dataclass
class _Seen:
    """The members read so far, by their normalized names: every one, the files (a hard link may point at one
    of these only), and the symbolic links (nothing may be written at or beneath one)."""

    names: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)


def _confined(archive: Path, member: tarfile.TarInfo, seen: _Seen) -> None:
    """`RestoreError` unless `member` is a file, folder or link that stays below the home, written once, not
    through a link an earlier member made (decision 531), with a name each part of which a disk takes."""
    name = member.name
    where = f"{archive}'s member {name!r}"
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or not name.strip("./"):
        raise RestoreError(f"{where} would be written outside the home: not a klaw backup, nothing was written")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise RestoreError(f"{where} is a device or a pipe, which no klaw home holds: nothing was written")
    if any(len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX for part in parts):
        raise RestoreError(
            f"{where} has a part over {_NAME_MAX} bytes, longer than a file name may be: not a klaw backup,"
            " nothing was written"
        )
    key = posixpath.normpath(name)
    above = key.split("/")
    if any("/".join(above[:end]) in seen.links for end in range(1, len(above))):
        raise RestoreError(
            f"{where} would be written through a link an earlier member made: not a klaw backup, nothing was written"
        )
    if key in seen.names:
        raise RestoreError(
            f"{where} is in the archive twice (the second would write over the first): not a klaw backup,"
            " nothing was written"
        )
    if member.issym():
        pointed = posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
        if member.linkname.startswith("/") or pointed == ".." or pointed.startswith("../"):
            raise RestoreError(
                f"{where} is a link leading out of the home (to {member.linkname}): not restored, nothing was written"
            )
        seen.links.add(key)
    if member.islnk():
        if posixpath.normpath(member.linkname) not in seen.files:
            raise RestoreError(f"{where} is a link to {member.linkname}, not a file before it: nothing was written")
        seen.files.add(key)
    if member.isreg():
        seen.files.add(key)
    seen.names.add(key)


def _extract(archive: Path, staging: Path, progress: Progress | None, *, links: bool) -> None:
    """Every member but the manifest into `staging`, private whatever the archive's modes or the umask, each
    looked at a second time as it is written (restore_extract.py)."""
    with _opened(archive, "restoring", progress) as (members, stream):
        write_private(archive, stream, (m for m in members if m.name != MANIFEST), staging, links=links)


@contextlib.contextmanager
def _opened(archive: Path, stage: str, progress: Progress | None) -> Iterator[tuple[Iterator[tarfile.TarInfo], Any]]:
    """The archive's members, read once from the start (a stream: no seeking back), with `progress` told
    the compressed bytes read; its damage and its absence words as `RestoreError`."""
    try:
        raw: IO[bytes] = open(archive, "rb")  # noqa: SIM115 - closed below, after the gzip reader
    except (FileNotFoundError, NotADirectoryError):  # ENOTDIR: a part of its path is a file (`bk/x.tgz`)
        raise RestoreError(
            f"{archive} does not exist: name the archive klaw backup wrote; nothing was written"
        ) from None
    except IsADirectoryError:
        raise RestoreError(
            f"{archive} is a folder: name the archive (a .tgz) klaw backup wrote; nothing was written"
        ) from None
    except PermissionError:
        raise RestoreError(f"{archive} cannot be read by you: nothing was written") from None
    total = os.fstat(raw.fileno()).st_size
    count = 0
    try:
        with raw, gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
            stream = tarfile.open(fileobj=unzipped, mode="r|")  # noqa: SIM115 - reads from `unzipped`, closed above

            def members() -> Iterator[tarfile.TarInfo]:
                nonlocal count
                for member in stream:
                    count += 1
                    if progress is not None:
                        progress(stage, raw.tell(), total)
                    yield member

            yield members(), stream
            while unzipped.read(_PIECE):  # to the end: gzip checks the whole stream's CRC and length there
                pass
            if progress is not None:
                progress(stage, total, total)
    except _DAMAGE as exc:
        if count == 0:
            raise RestoreError(
                f"{archive} is not a klaw backup (not a gzip'd tar: {_reason(exc)}): nothing was written"
            ) from None
        raise RestoreError(
            f"{archive} is cut short or damaged ({_reason(exc)}, after {count} member(s)): a copy that did not"
            " finish, or a damaged disk? Take another copy of the backup; nothing was written"
        ) from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "its compressed data ends early"
    return str(exc) or type(exc).__name__
