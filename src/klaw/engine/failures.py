"""Which failures to accept a message are worth the gateway sending it again, and which are final.

A gateway sends one frame at a time and retries a refused one with a backoff, so a frame refused as
retryable holds up every chat behind it. Only faults that can pass by themselves are retryable: the
engine stopping, the disk full or failing, the database busy or its server unreachable. Anything else —
bad input that slipped past the frame checks, a bug met by this one message — would fail the same way
every time: the frame is refused for good at once and the person is told, so nobody else waits on it.
(docs/decisions/040-final-and-transient-refusals.md)
"""

from __future__ import annotations

import errno

import apsw

from klaw.errors import KlawError
from klaw.store.protocol import StorageUnavailable

# Errors of the machine, not of the message: space or quota runs out, a device hiccups, resources run short.
TRANSIENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EAGAIN, errno.EBUSY, errno.EMFILE, errno.ENFILE}
    | {errno.ENOMEM, errno.EINTR, errno.EROFS}
)
# The disk (or the person's quota, or a file size limit) has no room: what freeing space mends.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
DISK_FULL_SQLSTATE = "53100"  # PostgreSQL's disk_full
# SQLite's counterparts: SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM.
_TRANSIENT_SQLITE: tuple[type[BaseException], ...] = (
    apsw.FullError,
    apsw.IOError,
    apsw.BusyError,
    apsw.LockedError,
    apsw.NoMemError,
)


class EngineStopping(KlawError, RuntimeError):
    """The engine is shutting down and takes no new messages; the gateway keeps them for the next run."""


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether a full disk is behind `exc`, anywhere in its chain (a `StorageError` raised from
    SQLITE_FULL, an OSError from the log's append): the person is then told so and what to do, not a
    bare "something went wrong" (decision 262)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, apsw.FullError) or getattr(exc, "sqlstate", None) == DISK_FULL_SQLSTATE:
            return True
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def permission_denied(exc: BaseException | None) -> PermissionError | None:
    """The `PermissionError` naming a file anywhere in `exc`'s chain (a folder of the home made unreadable
    while klaw runs), or None: the person is told which folder and how to give it back (decision 466)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, PermissionError) and isinstance(exc.filename, str):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def unreachable_database(exc: BaseException | None) -> StorageUnavailable | None:
    """The `StorageUnavailable` anywhere in `exc`'s chain (the PostgreSQL server down, restarting, cut off
    mid-call), or None: the person is told the database is away and that the message waits for it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StorageUnavailable):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether the same message may well be accepted if sent again later."""
    if isinstance(exc, (EngineStopping, TimeoutError, StorageUnavailable, *_TRANSIENT_SQLITE)):
        return True
    if isinstance(exc, OSError):
        return exc.errno in TRANSIENT_ERRNOS
    cause = exc.__cause__  # e.g. a StorageError raised from SQLITE_FULL
    return cause is not None and is_transient(cause)
