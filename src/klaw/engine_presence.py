"""Is an engine running on this KLAW_HOME? It holds the home's lock, or its socket answers a connect.

Maintenance that replaces or edits what an engine holds open (`klaw reindex`, `klaw memory forget`)
must not run under a live engine, and commands that would open their own engine (`klaw mcp serve`)
must know whether one runs. An engine opened as a library (`Klaw(home)`) holds the home's lock
(home_lock.py) without listening on the socket, so the lock is the answer; the socket still counts for
an engine of a klaw from before the lock (and tells whether the engine can be talked to). A socket file
nobody listens on is a stale leftover of a crash and does not count. Lives at the top level because
both the engine's neighbours (`cli`) and `memory` ask, and `memory` must not import `engine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_lock import (
    ENGINE_ROLE,
    LIBRARY,
    PIPED_CHAT,
    Holder,
    HomeHeldError,
    HomeLock,
    held_by_this_process,
    holder_of,
)
from klaw.store.errors import StorageError

CONNECT_TIMEOUT_SECONDS = 2.0
# What to do about an engine in the way: it may be any of these, and only its owner can tell which.
STOP_AN_ENGINE = (
    "stop it (Ctrl-C in 'klaw chat' or 'klaw mcp serve', stop 'klaw engine' or 'klaw serve', or end the"
    " program that opened the home with klaw's library API, Klaw(home))"
)


async def engine_answers(socket_path: Path, timeout_seconds: float = CONNECT_TIMEOUT_SECONDS) -> bool:
    """True when something accepts a connection on `socket_path` (or is too busy to, or refuses us
    permission: then it is not ours to stop, but it is running)."""
    try:
        if not stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            return False
    except FileNotFoundError:
        return False
    try:
        async with asyncio.timeout(timeout_seconds):
            _, writer = await asyncio.open_unix_connection(str(socket_path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except (TimeoutError, PermissionError):
        return True
    except OSError:
        return False  # e.g. a path too long to connect to, which no engine could have bound either
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def home_holder(home: KlawHome) -> Holder | None:
    """Who holds `home` now (an engine, listening or not, or maintenance), or None when nobody does."""
    holder = holder_of(home.root)
    if holder is None and await engine_answers(home.socket_path):
        return Holder(0, "", ENGINE_ROLE)  # an engine of a klaw from before the lock
    return holder


# How long `klaw chat` waits for a `klaw serve` or `klaw engine` that holds the home without listening yet (it is
# starting: its store, recovery, its MCP servers' `startWaitSeconds`, 5 s by default) before saying to try again.
STARTING_WAIT_SECONDS = 15.0
_POLL_SECONDS = 0.1


async def wait_for_listening(home: KlawHome, seconds: float = STARTING_WAIT_SECONDS) -> Holder | None:
    """The holder once an engine answers on the home's socket; None as soon as the home is free (the start
    failed, or it stopped) or held by something that is no engine; `TimeoutError` after `seconds`. For a
    `klaw chat` that found a service starting, as a restart after a crash leaves it for seconds: it was told to
    `kill` a service that was merely starting (newcomer19, decision 475)."""
    async with asyncio.timeout(seconds):
        while True:
            holder = holder_of(home.root)
            if holder is None or (holder.role and holder.role != ENGINE_ROLE):
                return None
            if await engine_answers(home.socket_path):
                return holder
            await asyncio.sleep(_POLL_SECONDS)


def held_message(home: KlawHome, holder: Holder) -> str:
    """One line for a person: who holds the home and what to do about it (this very program, when it
    opened a second `Klaw` on a home its first one still holds). A holder of another home holds the SQLite
    file this home's `database.path` names (decision 536)."""
    if of_another_home(home, holder):
        doing = "is using" if holder.role and holder.role != ENGINE_ROLE else "is running on"
        return (
            f"{holder.describe()} {doing} the home {holder.home}, on the SQLite database this home's database.path"
            f" names too: {how_to_stop(holder) if doing == 'is running on' else 'wait for it to finish'}"
        )
    if holder.role and holder.role != ENGINE_ROLE:
        return f"{holder.describe()} is using {home.root}: wait for it to finish"
    if holder.command == LIBRARY and held_by_this_process(home.root):  # "end that program" would mean this one
        return f"this program already has Klaw({str(home.root)!r}) open: use that one, or close it first"
    return f"{holder.describe()} is running on {home.root}: {how_to_stop(holder)}"


def of_another_home(home: KlawHome, holder: Holder) -> bool:
    """Whether `holder` runs on another home than `home` (it holds the SQLite file `home` names: decision 536)."""
    return bool(holder.home) and Path(holder.home).resolve() != home.root.resolve()


def how_to_stop(holder: Holder) -> str:
    """What ends the engine `holder` runs, in the words of the command it is (decision 259); the list
    of every possibility only when its lock file does not say (a klaw from before commands were kept)."""
    command, pid = holder.command, holder.pid
    kill = f", or `kill {pid}`" if pid else ""
    if command == "klaw chat":
        return "leave it first (/exit or Ctrl-D in its terminal)"
    if command == PIPED_CHAT:  # no terminal: it ends once its one message is answered (decision 487)
        return "it ends once its message is answered: wait for it"
    if command == "klaw serve":
        return (
            f"stop it first (Ctrl-C in its terminal, `systemctl --user stop klaw.service` when the service"
            f" runs it{kill})"
        )
    if command == "klaw mcp serve":
        return f"stop it first (close the MCP client that started it, Ctrl-C in its terminal{kill})"
    if command == LIBRARY:
        return f"end that program, or close its Klaw, first (its Klaw(home) holds the home until closed{kill})"
    if command.startswith("klaw "):
        return f"stop it first (Ctrl-C in its terminal{kill})"
    return STOP_AN_ENGINE


@contextlib.asynccontextmanager
async def holding_home(home: KlawHome, role: str, backend: str = "", database_path: str = "") -> AsyncIterator[None]:
    """Hold `home` as `role` for a maintenance command's whole run, so no engine starts meanwhile;
    raises `HomeHeldError` when something holds it already (an engine that only answers on the
    socket included). A SQLite file outside the home (`backend`, `database_path`: its database.path) is held
    as its engines hold it: another home's engine on it refuses the command (decision 536)."""
    lock = HomeLock.acquire(home.root, role)
    try:
        if await engine_answers(home.socket_path):
            holder = Holder(0, "", ENGINE_ROLE)
            raise HomeHeldError(held_message(home, holder), holder)
        held = hold_sqlite_file(home, backend, database_path, role)
        try:
            yield
        finally:
            if held is not None:
                held.release()
    finally:
        lock.release()


def hold_sqlite_file(home: KlawHome, backend: str, configured_path: str, role: str = ENGINE_ROLE) -> HomeLock | None:
    """Hold a SQLite klaw.db kept outside the home (`database.path`) as `role`, or None when the home's own
    lock covers it (the file is in the home) or the backend is PostgreSQL (engine leases share it).
    The lock is the file's own (`NAME.engine.lock` beside it), so two files in one folder are two databases;
    a file in another home (its engine.yaml beside it) is held by that home's lock, which its engine holds
    (decision 532's addendum). The file is found through any symbolic link first, so two names of one file
    take one lock; a file with several hard links is refused (decision 541). `HomeHeldError` names the holder
    and the home it runs on; the engines and the maintenance commands all hold the file here (decision 536)."""
    if backend != "sqlite":
        return None
    database = sqlite_file(home, configured_path)
    folder = database.parent
    if folder == home.root.resolve():
        return None
    another_home = (folder / "engine.yaml").is_file()
    try:
        if another_home:
            return HomeLock.acquire(folder, role)
        return HomeLock.acquire(folder, role, name=f"{database.name}.engine.lock", home=home.root)
    except HomeHeldError as exc:
        if another_home and not exc.holder.home:  # a lock written by a klaw from before homes were recorded
            exc.holder = dataclasses.replace(exc.holder, home=str(folder))
        raise


def sqlite_file(home: KlawHome, configured_path: str) -> Path:
    """The SQLite file `database.path` names, through every symbolic link (one lock for all its names);
    `StorageError` when the file has other hard links: no lock beside one name sees the others, and SQLite
    keeps a journal per name, so two names can lose a crashed write (decision 541)."""
    database = home.database_file(configured_path).resolve()
    with contextlib.suppress(FileNotFoundError):
        if (links := os.stat(database).st_nlink) > 1:
            raise StorageError(
                f"the SQLite database {database} has {links} names (hard links): an engine opened through another"
                " name would not be refused, and SQLite keeps a journal per name. Keep one name: find the others"
                f" with `find / -xdev -samefile {database}` and remove them, or give this home a copy"
                " (cp --no-preserve=links) as its own database.path"
            )
    return database
