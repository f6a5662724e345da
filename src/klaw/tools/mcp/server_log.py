"""A command MCP server's error output: `KLAW_HOME/mcp/<server>.log` (0600), bounded while the server runs.

The file is appended to, a line marking each start: a server that crashed is restarted within a second,
and its last words must outlive the restart (decision 252). The child writes into a pipe, not into the
file: klaw copies what comes out into the file and, past `LOG_MAX_BYTES`, keeps only its newest
`LOG_KEEP_BYTES`, as it does at each start. With the file given to the child directly, it was bounded
only at the server's next start: a chatty server (a debug log, a warning per request) grew it without
bound for as long as it ran. The copy runs in the event loop (a pipe read, a local file write); a
child writing faster than the loop reads waits on its full pipe, as it would on a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import TextIO

from klaw.private_files import open_private, private_dirs

LOG_MAX_BYTES = 1_000_000  # a server's error output past this is cut…
LOG_KEEP_BYTES = 500_000  # …to about its newest half (from a line's start)
DRAIN_SECONDS = 2.0
"""At the server's end, how long what it wrote last may take to come out of the pipe (a process it
started and left running may hold the pipe open for good)."""
CUT_NOTE = b"[earlier output cut: the log grew past 1 MB]\n"


def log_path(log_dir: Path, name: str) -> Path:
    """Where a command server's error output goes."""
    return log_dir / f"{name}.log"


async def server_stderr(log_dir: Path, name: str, started: datetime | None, stack: AsyncExitStack) -> TextIO:
    """The stream to give the server as its stderr: the write end of a pipe whose output is appended to
    the server's log (its earlier runs kept, cut to their tail when too long), after a line marking this
    start. Everything is closed by `stack`, after the server: the last output is copied first."""
    private_dirs(log_dir)
    fd = open_private(log_path(log_dir, name), os.O_RDWR | os.O_APPEND)
    stack.callback(os.close, fd)
    os.fchmod(fd, 0o600)
    log = _BoundedLog(fd)
    when = (started or datetime.now().astimezone()).isoformat(timespec="seconds")
    log.write(f"--- klaw started MCP server {name!r} at {when} ---\n".encode())  # before the child's output
    read_fd, write_fd = os.pipe()
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    try:
        reading = os.fdopen(read_fd, "rb", buffering=0)  # the pipe transport owns and closes it
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    try:
        transport, _ = await loop.connect_read_pipe(lambda: _Copy(log, ended), reading)
    except BaseException:
        reading.close()
        os.close(write_fd)
        raise
    stack.push_async_callback(_drained, transport, ended)
    errlog = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")  # closed by the stack
    stack.callback(errlog.close)  # first: with klaw's end closed, the pipe ends when the child's copy does
    return errlog


async def _drained(transport: asyncio.ReadTransport, ended: asyncio.Future[None]) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            await asyncio.shield(ended)
    transport.close()


class _BoundedLog:
    """The log file's descriptor and size: each write appended, the file cut to its tail past the bound."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._size = keep_tail(fd)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._size += len(data)
        if self._size > LOG_MAX_BYTES:
            self._size = keep_tail(self._fd)


class _Copy(asyncio.Protocol):
    """Reads the server's end of the pipe into its log."""

    def __init__(self, log: _BoundedLog, ended: asyncio.Future[None]) -> None:
        self._log = log
        self._ended = ended

    def data_received(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # a full disk: the output is lost, the server itself goes on
            self._log.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._ended.done():
            self._ended.set_result(None)


def keep_tail(fd: int) -> int:
    """Past LOG_MAX_BYTES, the file cut to its newest LOG_KEEP_BYTES, from the first line start in them,
    after a line saying so; returns the file's size."""
    size = os.fstat(fd).st_size
    if size <= LOG_MAX_BYTES:
        return size
    tail = os.pread(fd, LOG_KEEP_BYTES, size - LOG_KEEP_BYTES)
    newline = tail.find(b"\n")
    tail = tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail
    os.ftruncate(fd, 0)
    os.write(fd, CUT_NOTE + tail)
    return len(CUT_NOTE) + len(tail)
