"""One engine per KLAW_HOME: an exclusive `flock` on `KLAW_HOME/engine.lock`, held for the engine's life.

The socket alone cannot say that a home is in use: an engine opened as a library (`Klaw(home)`) does not
listen on it, yet it runs the scheduler, writes klaw.db and the log, and resends replies. So every engine,
listening or not, holds this lock from before start-up recovery until its shutdown has closed the store;
maintenance that replaces or edits what an engine holds (`klaw reindex`, `klaw memory forget`) holds it too,
for its whole run. The kernel releases a `flock` when its holder exits however it exits (kill -9 included),
so a lock is never stale; the file itself stays (unlinking it would let two processes lock two different
files of one name). It holds the holder's pid, program, role and command (`klaw chat`, `klaw serve`…, or
`library` for a program using `Klaw(home)`), and whether a program gave its engine a configuration of its
own (`klaw config show` then says its table is not that engine's, decision 456), only for what another
process prints: what to do about a `klaw chat` (leave it) is not what to do about `klaw serve` (talk to it
on its web page), and the program's name alone ("klaw") cannot tell them apart (decision 259). `flock`
belongs to an open file, not a process, so two engines in one process refuse each other too. Decision:
docs/decisions/233-home-lock.md.

Lives at the top level: the engine, `memory` (reindex) and `cli` all take it, and `memory` must not
import `engine`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from klaw.errors import KlawError
from klaw.private_files import open_private, private_dirs

try:
    import fcntl
except ImportError as _missing:  # pragma: no cover - Windows, which klaw does not support
    raise ImportError(
        "klaw needs the fcntl module (Linux or macOS) to keep one engine per KLAW_HOME; on Windows run it under WSL"
    ) from _missing

LOCK_FILE_NAME = "engine.lock"
# A process asking whether the home is held takes a shared lock for a few microseconds; a process
# taking it exclusively tries again for this long before it believes someone really holds it.
_ACQUIRE_TRIES = 5
_ACQUIRE_PAUSE_SECONDS = 0.02


class HomeHeldError(KlawError, RuntimeError):
    """Another process holds the home (an engine, or maintenance); `holder` says who, if known."""

    def __init__(self, message: str, holder: Holder) -> None:
        super().__init__(message)
        self.holder = holder


ENGINE_ROLE = "an engine"
# The command of a process that holds a home without a `klaw` command: a program using klaw's library API.
LIBRARY = "library"
PIPED_CHAT = "klaw chat (piped)"
"""The command a piped `klaw chat` (`echo … | klaw chat`) holds a home as: it ends once its message is
answered, so another piped chat waits for it (cli/piped_wait.py, decision 487)."""

# The `klaw` command this process runs (`klaw chat`), set by the CLI for the command's run; a process
# that never sets it is a program using klaw's library API.
_command: contextvars.ContextVar[str] = contextvars.ContextVar("klaw_command", default=LIBRARY)
# Where the holding engine's configuration comes from: "" (engine.yaml, or not an engine), or PROGRAM_CONFIG
# for a program's `Klaw(config=...)`, so `klaw config show` can say its table is not what that engine uses.
PROGRAM_CONFIG = "program"
_config_source: contextvars.ContextVar[str] = contextvars.ContextVar("klaw_config_source", default="")


@contextlib.contextmanager
def running_command(command: str) -> Iterator[None]:
    """Within this block, a lock this process takes says it is held by `command` (e.g. "klaw chat")."""
    token = _command.set(command)
    try:
        yield
    finally:
        _command.reset(token)


@contextlib.contextmanager
def program_config() -> Iterator[None]:
    """Within this block, a lock this process takes says its engine uses a program's own configuration."""
    token = _config_source.set(PROGRAM_CONFIG)
    try:
        yield
    finally:
        _config_source.reset(token)


@dataclass(frozen=True)
class Holder:
    """Who holds a home, as its lock file says (pid 0 and empty names if it had not written it yet).
    `command`: the `klaw` command holding it, `LIBRARY`, or "" when the file does not say (written
    by a klaw from before commands were recorded). `config`: PROGRAM_CONFIG when the engine was given its
    configuration by a program (`Klaw(config=...)`), else ""."""

    pid: int
    program: str
    role: str
    command: str = ""
    config: str = ""
    home: str = ""  # the home the holder runs on (a SQLite file's own lock is not in it: decision 536), "" unknown

    def describe(self) -> str:
        """'`klaw chat` (pid 123)', 'a program using klaw's library API (pid 123, program my_bot.py)',
        'klaw reindex (pid 123, program klaw)', or 'an engine (pid 123, program klaw)' when unknown."""
        if self.role in ("", ENGINE_ROLE) and self.command.startswith("klaw "):
            return f"`{self.command}` (pid {self.pid})" if self.pid else f"`{self.command}`"
        who = self.role or "an engine"
        if self.role in ("", ENGINE_ROLE) and self.command == LIBRARY:
            who = "a program using klaw's library API"
        if not self.pid:
            return who
        return f"{who} (pid {self.pid}, program {self.program})" if self.program else f"{who} (pid {self.pid})"


def lock_path(home_root: Path) -> Path:
    return home_root / LOCK_FILE_NAME


# The lock files (st_dev, st_ino) this process holds: a refusal can tell "this very program" from another
# process of the same pid (a container's pid 1 on a shared home).
_held_here: set[tuple[int, int]] = set()


class HomeLock:
    """The exclusive lock on a home, held from `acquire` until `release` (or the process's end)."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor: int | None = descriptor
        info = os.fstat(descriptor)
        self._identity = (info.st_dev, info.st_ino)
        _held_here.add(self._identity)

    @classmethod
    def acquire(
        cls, home_root: Path, role: str = ENGINE_ROLE, *, name: str = LOCK_FILE_NAME, home: Path | None = None
    ) -> HomeLock:
        """Hold `home_root` (created 0700 if missing) for `role`; raise `HomeHeldError` naming the holder.
        `name`: another lock file in that folder (a SQLite file's own, beside it: decision 532's addendum);
        `home`: the home the holder runs on, recorded for whoever is refused (default `home_root`)."""
        private_dirs(home_root)
        path = home_root / name
        try:
            descriptor = open_private(path, os.O_RDWR)
        except OSError as exc:
            if (damage := _damage(path)) is None:
                raise
            raise OSError(  # no errno: the words are the message ("[Errno 21] Is a directory: …" was)
                f"{path} is {damage}, not klaw's lock file: when no klaw runs on this home, remove it"
                f" (rm -r {path}) and start again; klaw makes the file itself"
            ) from exc
        try:
            os.fchmod(descriptor, 0o600)
            for attempt in range(_ACQUIRE_TRIES):
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == _ACQUIRE_TRIES - 1:
                        holder = _read_holder(descriptor)
                        raise HomeHeldError(f"{holder.describe()} holds {home_root}", holder) from None
                    time.sleep(_ACQUIRE_PAUSE_SECONDS)
            program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
            record = {"pid": os.getpid(), "program": program, "role": role, "command": _command.get()}
            record["home"] = str(home or home_root)
            if source := _config_source.get():
                record["config"] = source
            encoded = (json.dumps(record) + "\n").encode()
            try:  # written over the last holder's record, then cut: a full disk leaves a record, not nothing
                os.pwrite(descriptor, encoded, 0)
                os.ftruncate(descriptor, len(encoded))
            except OSError as exc:  # the file's name, for the words saying which disk is full (cli/edge_failures.py)
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
        except BaseException:
            os.close(descriptor)
            raise
        return cls(path, descriptor)

    def release(self) -> None:
        """Let the home go (the record is emptied first, so nobody reads a pid that no longer holds it)."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is None:
            return
        _held_here.discard(self._identity)
        with contextlib.suppress(OSError):
            os.ftruncate(descriptor, 0)
        os.close(descriptor)  # closing the only descriptor of the open file releases the flock


def _damage(path: Path) -> str | None:
    """What stands where the lock file goes, when it is not a file one can open (decision 443)."""
    if path.is_symlink() and not path.exists():
        return f"a symbolic link to {os.readlink(path)}, which does not exist"
    if path.is_dir():
        return "a directory"
    return None


def held_by_this_process(home_root: Path) -> bool:
    """True when a `HomeLock` of this process holds `home_root` now."""
    try:
        info = os.stat(lock_path(home_root))
    except OSError:
        return False
    return (info.st_dev, info.st_ino) in _held_here


def holder_of(home_root: Path) -> Holder | None:
    """Who holds `home_root` now, or None when nobody does (no lock file, or nobody locks it)."""
    try:
        descriptor = os.open(lock_path(home_root), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:  # another user's lock file: not ours to use, so held as far as we can tell
        return Holder(0, "", "")
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(descriptor)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def _read_holder(descriptor: int) -> Holder:
    try:
        record = json.loads(os.pread(descriptor, 4096, 0))
        command, config, home = (str(record.get(key, "")) for key in ("command", "config", "home"))
        return Holder(int(record["pid"]), str(record["program"]), str(record["role"]), command, config, home)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not written yet, or by something else
        return Holder(0, "", "")
