"""The engine socket's file: bound 0600, a stale one replaced, a live one refused, removed only if ours;
and the home held for the engine's life.

Apart from the connections because it is about the file system, not the protocol. One engine per
KLAW_HOME is enforced by the home's lock (`hold_home`, home_lock.py), which every engine holds whether
it listens or not (a library engine does not); a live socket is refused too (a second engine would
steal the first one's gateways). The socket file is identified by (st_dev, st_ino) so that closing an
old engine never unlinks a newer engine's socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from klaw.engine_presence import held_message, hold_sqlite_file, sqlite_file
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.home_lock import HomeHeldError, HomeLock

log = logging.getLogger(__name__)

_MAX_UNIX_PATH_BYTES = 107  # sockaddr_un.sun_path is 108 bytes on Linux, including the NUL


class EngineSocketError(KlawError, RuntimeError):
    """The socket could not be set up; the message says why, for the person starting the engine."""


class EngineAlreadyRunningError(EngineSocketError):
    """Another engine answers on the socket path; starting a second one would steal its gateways. `open`:
    this program's own `Klaw` holding the home, when it is one (decision 513), else None."""

    open: Any = None


def hold_home(home: KlawHome, stack: AsyncExitStack) -> None:
    """Hold `home` until `stack` closes; raise `EngineAlreadyRunningError` naming whoever holds it."""
    try:
        lock = HomeLock.acquire(home.root)
    except HomeHeldError as exc:
        raise EngineAlreadyRunningError(f"cannot start: {held_message(home, exc.holder)}") from None
    stack.callback(lock.release)


def hold_database(home: KlawHome, backend: str, configured_path: str, stack: AsyncExitStack) -> None:
    """Hold a SQLite klaw.db kept outside the home (an absolute `database.path`): two homes pointed at one
    file ran two engines on it, the second re-binding its vector tables to its own embedder under the first
    (adversary32, decision 532). Inside the home, the home's lock does it (`hold_sqlite_file` says where the
    lock is; maintenance in another home takes the same one: decision 536)."""
    try:
        lock = hold_sqlite_file(home, backend, configured_path)
    except HomeHeldError as exc:
        database = sqlite_file(home, configured_path)
        elsewhere = f" from the home {exc.holder.home}" if exc.holder.home else ""
        raise EngineAlreadyRunningError(
            f"cannot start: {exc.holder.describe()} is running on the SQLite database {database} (database.path)"
            f"{elsewhere}: one engine per SQLite database. Give this home its own database.path,"
            " or stop the other engine; engines sharing a database need PostgreSQL (docs/postgres.md)"
        ) from None
    if lock is not None:
        stack.callback(lock.release)


class SocketFile:
    """The socket file at `path`, and which inode is ours once bound."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of our socket file

    async def remove_stale(self) -> None:
        """Unlink a socket file nobody answers on; raise if the path is not a socket or an engine answers."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise EngineSocketError(f"{self.path} exists and is not a socket; move it away and start again")
        try:
            async with asyncio.timeout(5):
                _, writer = await asyncio.open_unix_connection(str(self.path))
        except (ConnectionRefusedError, FileNotFoundError):
            log.info("removing stale engine socket %s (no engine answers on it)", self.path)
            self.path.unlink(missing_ok=True)
            return
        except TimeoutError:
            pass  # someone is listening but busy: treat as live
        except OSError as exc:  # e.g. a socket of another user
            raise EngineSocketError(f"cannot check {self.path}: {exc.strerror or exc}") from exc
        else:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        raise EngineAlreadyRunningError(
            f"another klaw engine is already running on {self.path} (klaw serve, engine or chat): talk to it"
            " through its channels (the web page, Telegram), or stop it first"
        )

    def bind(self) -> socket.socket:
        """A stream socket bound to `path` with mode 0600, not yet listening; remembers the file as ours."""
        if len(os.fsencode(self.path)) > _MAX_UNIX_PATH_BYTES:
            raise EngineSocketError(f"socket path {self.path} is longer than {_MAX_UNIX_PATH_BYTES} bytes")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # On Linux the socket file takes the socket inode's mode at bind: 0600 from birth, with no
            # process-wide umask change racing other threads. The chmod covers systems that ignore it.
            with contextlib.suppress(OSError):
                os.fchmod(sock.fileno(), 0o600)
            sock.bind(str(self.path))
            os.chmod(self.path, 0o600)
            info = os.stat(self.path)
        except OSError as exc:
            sock.close()
            raise EngineSocketError(f"cannot listen on {self.path}: {exc.strerror or exc}") from exc
        self._identity = (info.st_dev, info.st_ino)
        return sock

    def remove(self) -> None:
        """Unlink the socket file if it is still ours (not one a newer engine bound since)."""
        if self._identity is None:
            return
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:
                self.path.unlink()
        self._identity = None
