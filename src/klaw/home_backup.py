"""`klaw backup`: one private archive of a home, consistent while klaw runs on it (decision 512).

`tar czf … -C ~ .klaw` made a world-readable archive (the umask's 0644) of every conversation and
service.env, packed the embedder's 87 MB cache, and copied klaw.db's pages while the engine wrote them.
Here:

- The SQLite files (the memory's klaw.db, scheduler.db) are copied with SQLite's online backup API in one
  read transaction: a snapshot of one moment, whatever the engine writes meanwhile (WAL readers do not
  block it). Their -wal and -shm files are not needed beside a snapshot.
- The conversation log is copied after the database. A line is logged (and fsync'd) before its row is
  stored, so every row of the snapshot has its line in the copy; a line logged after the snapshot is in
  the copy's log only, and the first start of the restored home stores it (start-up recovery reads files
  modified after the store's watermark, and the archive keeps each file's time). Lines are only ever
  appended (a forget rewrites a file whole, atomically), so a file read while a line is being appended is
  cut after its last whole line: the copy never holds a torn line `klaw log check` would report. The
  gateway's buffer (`gateway/*.jsonl`) is appended the same way and cut the same way.
- What is rebuilt on its own or belongs to the running process is left out: `cache/` (the embedder's
  graphs), `docs_index.db`, `logs/`, `sandbox/` (`klaw sandbox install` makes it again), sockets,
  `engine.lock`, `web_address`, `.private-walk` (so the restored home is checked for privacy once), klaw.db.floats.
- The archive is created 0600 whatever the umask, under a temporary name beside it, and given its name
  only once whole; an existing file is never replaced.
- The disk it is written to must have room first (decision 536): the database copies, then an archive of
  at most the tar of what is packed (gzip's output is never more than its input and a few bytes a block);
  short of that it is refused with both figures, before the archive is opened. A full disk part-way
  stopped everything else writing there (the engine's own log) before "cannot write …".
- Its first member, `klaw-backup.json`, says what it is (`FORMAT`, the klaw that made it, when, which
  member is the memory's database, the sandbox's packages): `klaw restore` reads it before writing anything
  (home_restore.py, decision 522). It is not a file of the home: a home holding one (extracted by hand)
  does not pack it again.

On PostgreSQL the memory and its log are in the database: the archive holds the folder's files and the
report says to back the database up with pg_dump. The SQLite copy a `klaw db migrate` left in such a home
(klaw.db, the chats' JSONL files; not the tasks' run logs) is left out and named (decision 539).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.private_files import open_private
from klaw.sparse_member import add_sparse, is_sparse

# Left out, by name at the home's top: rebuilt on their own, or the running process's.
LEFT_OUT = {
    "cache": "rebuilt on first use",
    "docs_index.db": "rebuilt on its own",
    "logs": "rewritten on their own",
    "sandbox": "made again by klaw sandbox install",
    "engine.lock": "the running process's",
    "web_address": "the running page's",
    ".private-walk": "so the restored home is checked for privacy once",
}
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
APPENDED = ("conversations", "gateway")  # folders of append-only JSONL files: cut after their last whole line
_PIECE = 1 << 20
MANIFEST = "klaw-backup.json"
FORMAT = 1  # moved on when a restore of this klaw could not use what an older one packed

Progress = Callable[[int, int], None]  # (bytes archived so far, bytes in all)


class BackupError(KlawError, RuntimeError):
    """The backup cannot be written (its file exists, its folder is missing); the message says what to do."""


@dataclass
class BackupReport:
    path: Path
    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)  # "cache/ (rebuilt on first use)", …
    postgres: bool = False  # the memory is in PostgreSQL: not in this archive


def default_name(now: datetime | None = None) -> str:
    return f"klaw-{(now or datetime.now(UTC)).strftime('%Y-%m-%d-%H%M%S')}.tgz"


def back_up(
    home: KlawHome,
    target: Path,
    *,
    database: Path | None,
    progress: Progress | None = None,
    left_copy: Path | None = None,
) -> BackupReport:
    """Write `home` into a new gzip'd tar at `target` (a folder: a dated name inside it). `database`: the
    SQLite file of the memory (`database.path`), None on PostgreSQL; `left_copy`, on PostgreSQL, the SQLite
    file `database.path` names, which a migrate left and which is left out with the chats' JSONL files.
    Blocking: run it in a thread."""
    if target.is_dir():
        target = target / default_name()
    if target.resolve().is_relative_to(home.root.resolve()):
        raise BackupError(
            f"{target} is inside the home ({home.root}): each backup would be packed into the next;"
            " name a place outside it (klaw backup ~/backups/), nothing was written"
        )
    if target.exists():
        raise BackupError(f"{target} exists already: name another file (klaw backup PATH), nothing was written")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a folder: create it first, or name another place")
    report = BackupReport(path=target, postgres=database is None)
    databases = [path for path in (database, home.scheduler_db) if path is not None and path.is_file()]
    manifest = _manifest(home, database)
    copies = sum(_size(Path(f"{path}{suffix}")) for path in databases for suffix in ("", "-wal"))
    _refuse_short_disk(target, copies, 0, 0)  # the copies are written beside the archive first
    with tempfile.TemporaryDirectory(prefix=".klaw-backup-", dir=target.parent) as scratch:
        snapshots = [(_snapshot(path, Path(scratch) / f"{n}.db"), path) for n, path in enumerate(databases)]
        # After the snapshots: every row they hold has its line in the log read below.
        plan = [(snapshot, _member(home, original)) for snapshot, original in snapshots]
        plan += list(_files(home, set(databases), report, _left_copy(home, left_copy, report)))
        total = sum(_size(path) for path, _ in plan)
        _refuse_short_disk(target, 0, archive_bound(plan, len(manifest)), total)
        partial = target.parent / f".{target.name}.partial"
        descriptor = open_private(partial, os.O_WRONLY | os.O_EXCL)
        try:
            with os.fdopen(descriptor, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as archive:
                _add_manifest(archive, manifest)
                report.files += 1
                for path, name in plan:
                    try:
                        report.bytes += _add(archive, path, name)
                    except FileNotFoundError:  # gone since the walk (a rewrite's temporary file): not in the home
                        continue
                    report.files += 1
                    if progress is not None:
                        progress(report.bytes, max(total, report.bytes))
                raw.flush()
            os.link(partial, target)  # never over a file that appeared meanwhile (FileExistsError)
        except FileExistsError:
            raise BackupError(f"{target} appeared while the backup was written: nothing was replaced") from None
        finally:
            partial.unlink(missing_ok=True)
    return report


def archive_bound(plan: list[tuple[Path, str]], manifest: int) -> int:
    """The most the gzip'd tar of `plan` can take: each member's header (a PAX header before it for a long or
    non-ASCII name), its data in 512-byte blocks (a sparse file's data and its map), the end blocks padded
    to tar's 10 KiB record; deflate then adds at most 5 bytes a 16 KiB stored block, and gzip its header and
    trailer. Taken from the files' sizes now: a log file appended to meanwhile is cut at what it held then."""
    tar = 512 + _blocks(manifest)
    for path, name in plan:
        data = _size(path)
        tar += 1024 + _blocks(2 * len(name.encode()) + 64) + _blocks(data) + _blocks(data // 128)
    tar = -(-(tar + 1024) // tarfile.RECORDSIZE) * tarfile.RECORDSIZE
    return tar + 5 * (tar // (16 << 10) + 1) + 1024


def _blocks(size: int) -> int:
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


def _refuse_short_disk(target: Path, copies: int, archive: int, data: int) -> None:
    """`BackupError` when the disk of `target` has less free than the database copies (`copies`, written beside
    the archive first) or the archive's upper bound (`archive`, for `data` bytes of files) need: a backup that
    filled the disk part-way failed ("cannot write …") after stopping whatever else writes there."""
    free = shutil.disk_usage(target.parent).free
    needed = copies or archive
    if needed <= free:
        return
    what = (
        f"copies of the databases ({copies / 1e6:,.1f} MB) are made beside the archive first"
        if copies
        else f"the archive needs up to {archive / 1e6:,.1f} MB (its files hold {data / 1e6:,.1f} MB: compressed it"
        " is usually smaller, but klaw cannot know by how much before writing it)"
    )
    raise BackupError(
        f"{what}, and {target.parent} has {free / 1e6:,.1f} MB free: free some space there, or back up onto"
        " another disk (klaw backup /other/disk/); nothing was written"
    )


def _manifest(home: KlawHome, database: Path | None) -> bytes:
    """What `klaw restore` reads first: the format, the klaw and moment that made it, the database's member
    (None: PostgreSQL, or no klaw.db yet), and the sandbox's packages (sandbox/ is left out: the restore
    names the `klaw sandbox install` bringing them back)."""
    from klaw import __version__

    record = {
        "format": FORMAT,
        "klaw": __version__,
        "made": datetime.now(UTC).isoformat(timespec="seconds"),
        "database": _member(home, database) if database is not None and database.is_file() else None,
        "postgres": database is None,
        "sandboxPackages": sandbox_packages(home),
    }
    return (json.dumps(record, indent=1) + "\n").encode()


def sandbox_packages(home: KlawHome) -> list[str]:
    """The packages installed into the sandbox's virtualenv (`klaw sandbox install`), pip's own left out."""
    from importlib.metadata import distributions

    found = set()
    for site in sorted(home.sandbox_venv.glob("lib/python*/site-packages")):
        for dist in distributions(path=[str(site)]):
            name = dist.metadata["Name"] if dist.metadata else None
            if name and name.lower() not in {"pip", "setuptools", "wheel"}:
                found.add(name)
    return sorted(found, key=str.lower)


def _add_manifest(archive: tarfile.TarFile, manifest: bytes) -> None:
    info = tarfile.TarInfo(MANIFEST)
    info.size, info.mode, info.mtime = len(manifest), 0o600, int(datetime.now(UTC).timestamp())
    archive.addfile(info, io.BytesIO(manifest))


def _snapshot(source: Path, copy: Path) -> Path:
    """`source` as of one moment, by SQLite's online backup (one read transaction: writers go on)."""
    import apsw  # not for `klaw --help`

    os.close(open_private(copy, os.O_WRONLY))  # created 0600 before SQLite opens it
    reader = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
    writer = apsw.Connection(str(copy))
    try:
        with writer.backup("main", reader, "main") as backup:
            while not backup.done:
                backup.step(-1)
        writer.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal to carry beside it
    finally:
        writer.close()
        reader.close()
    return copy


def _member(home: KlawHome, path: Path) -> str:
    """The name in the archive: the path below the home (a database kept elsewhere: its file's name)."""
    with contextlib.suppress(ValueError):
        return path.relative_to(home.root).as_posix()
    return f"outside-home/{path.name}"


def _left_copy(home: KlawHome, left_copy: Path | None, report: BackupReport) -> set[Path]:
    """The SQLite copy a migrate left in a PostgreSQL home (`left_copy` and its side files, the chats' folders
    under conversations/), named in the report; empty when there is none (decision 539)."""
    from klaw.scheduling.names import is_task_log_dir

    if left_copy is None:
        return set()
    files = {Path(f"{left_copy}{s}") for s in ("", *SQLITE_SIDECARS, ".vectors", ".floats", ".floats-rowids")}
    chats = home.conversations.iterdir() if home.conversations.is_dir() else iter(())
    files |= {path for path in chats if path.is_dir() and not is_task_log_dir(path.name)}
    there = sorted(_member(home, path) for path in files if path.exists())
    if there:
        report.left_out.append(
            f"{', '.join(there)} (the SQLite copy 'klaw db migrate' left: this home's memory is in PostgreSQL)"
        )
    return files


def _files(
    home: KlawHome, databases: set[Path], report: BackupReport, left_copy: set[Path]
) -> Iterator[tuple[Path, str]]:
    """Every file and folder of the home to archive (the log's first), in a stable order."""
    skipped = {home.root / name for name in (*LEFT_OUT, MANIFEST)} | left_copy
    skipped |= {Path(f"{p}{s}") for p in databases for s in ("", *SQLITE_SIDECARS, ".floats", ".floats-rowids")}
    skipped |= {home.root / f"{home.docs_index_file.name}{suffix}" for suffix in SQLITE_SIDECARS}
    for name, why in LEFT_OUT.items():
        if (home.root / name).exists():
            report.left_out.append(f"{name}{'/' if (home.root / name).is_dir() else ''} ({why})")
    tops = sorted(home.root.iterdir(), key=lambda path: (path.name not in APPENDED, path.name))
    for top in tops:
        for path, name in _walk(home, top, skipped, report):
            if path.is_symlink() and _leads_out(home, path):
                report.left_out.append(f"{name} (a link leading out of the home: klaw restore refuses those)")
                continue
            yield path, name


def _leads_out(home: KlawHome, link: Path) -> bool:
    """A symbolic link whose target is not below the home (absolute, or climbing out with `..`)."""
    try:
        target = os.readlink(link)
    except OSError:
        return False
    return os.path.isabs(target) or not Path(os.path.normpath(link.parent / target)).is_relative_to(home.root)


def _walk(home: KlawHome, top: Path, skipped: set[Path], report: BackupReport) -> Iterator[tuple[Path, str]]:
    """`top` and everything below it, folders before what they hold, by a stack rather than recursion: a
    folder 1,100 levels deep made by code in the sandbox raised RecursionError (decision 524). A file or
    folder that goes while klaw runs (a rewrite's temporary file) is passed over: the home holds it no
    longer (review55, decision 517). One whose path is longer than the system takes is named in the report
    and left out, with what is below it."""
    stack = [top]
    while stack:
        path = stack.pop()
        if path in skipped:
            continue
        try:
            mode = path.lstat().st_mode
            children = sorted(path.iterdir(), reverse=True) if stat.S_ISDIR(mode) else []
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise
            report.left_out.append(f"{_shown(path.relative_to(home.root).as_posix())} (its path is too long to read)")
            continue
        if stat.S_ISDIR(mode):
            yield path, path.relative_to(home.root).as_posix()
            stack += children
        elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            yield path, path.relative_to(home.root).as_posix()
        elif not stat.S_ISSOCK(mode):  # a socket is a running process's (engine.sock): passed over
            kind = "a pipe" if stat.S_ISFIFO(mode) else "a device"  # klaw restore refuses them: named (decision 531)
            report.left_out.append(f"{_shown(path.relative_to(home.root).as_posix())} ({kind}, not a file)")


def _shown(name: str) -> str:
    """A path short enough to read in a report: its start and end."""
    return name if len(name) <= 120 else f"{name[:60]}…{name[-59:]}"


def _size(path: Path) -> int:
    """What archiving `path` reads: a sparse file's data, not its holes."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return 0
    if not stat.S_ISREG(info.st_mode):
        return 0
    return min(info.st_size, info.st_blocks * 512) if is_sparse(info) else info.st_size


def _add(archive: tarfile.TarFile, path: Path, name: str) -> int:
    """`path` as `name`; a log file cut after its last whole line. Returns the bytes written."""
    info = archive.gettarinfo(str(path), arcname=name)
    info.mode &= ~(stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)  # no setuid program comes back (decision 524)
    if not info.isreg():
        archive.addfile(info)
        return 0
    with open(path, "rb") as handle:
        seen = os.fstat(handle.fileno())
        size = seen.st_size  # what is appended after this is not taken
        if name.split("/", 1)[0] in APPENDED and name.endswith(".jsonl"):
            size = _whole_lines(handle, size)
        elif is_sparse(seen):  # its holes kept: not gigabytes of zeros read, packed and written back
            return add_sparse(archive, info, handle, size)
        info.size = size
        archive.addfile(info, _Bounded(handle, size))
    return size


def _whole_lines(handle: BinaryIO, size: int) -> int:
    """How much of the file ends with a whole line: a last line without its newline is kept when it is a
    whole JSON record (a file edited by hand), cut when it is not (being appended at this moment)."""
    end = size
    while end > 0:
        start = max(0, end - _PIECE)
        handle.seek(start)
        piece = handle.read(end - start)
        newline = piece.rfind(b"\n")
        if newline >= 0:
            cut = start + newline + 1
            break
        end = start
    else:
        cut = 0
    if cut < size:
        handle.seek(cut)
        try:
            json.loads(handle.read(size - cut))
        except ValueError:
            return cut
    return size


class _Bounded(io.RawIOBase):
    """The first `size` bytes of an open file, read from its start."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        handle.seek(0)
        self._handle, self._left = handle, size

    def readable(self) -> bool:
        return True

    def read(self, count: int = -1) -> bytes:
        count = self._left if count < 0 else min(count, self._left)
        data = self._handle.read(count)
        self._left -= len(data)
        return data
