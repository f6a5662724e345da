"""A command MCP server's error output: `KLAW_HOME/mcp/<server>.log` (0600), bounded while the server runs.

The file is appended to, a line marking each start: a server that crashed is restarted within a second,
and its last words must outlive the restart (decision 252). The child writes into a pipe, not into the
file: klaw copies what comes out into the file and, past `LOG_MAX_BYTES`, keeps only its newest
`LOG_KEEP_BYTES`, as it does at each start. With the file given to the child directly, it was bounded
only at the server's next start: a chatty server (a debug log, a warning per request) grew it without
bound for as long as it ran. The copy runs in the event loop (a pipe read, a local file write), so it
is bounded in rate too: past `RATE_BYTES` in a second, the rest of that second's output is read ten
times a second in large reads and dropped, and at the second's end a line says how many bytes were
skipped, followed by the newest few kilobytes from a line's start. A server spewing as fast as it can
cost the engine's loop half a CPU (a 64 KB read, a write and, every half megabyte, a cut); now a few
reads a second. The pipe is drained all the same, so the server never waits on it for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Iterable
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import TextIO

from klaw.private_files import open_private, private_dirs
from klaw.redaction import MASK, mask_url_credentials

LOG_MAX_BYTES = 1_000_000  # a server's error output past this is cut…
LOG_KEEP_BYTES = 500_000  # …to about its newest half (from a line's start)
DRAIN_SECONDS = 2.0
"""At the server's end, how long what it wrote last may take to come out of the pipe (a process it
started and left running may hold the pipe open for good)."""
CUT_NOTE = b"[earlier output cut: the log grew past 1 MB]\n"
RATE_BYTES = 256_000
"""A second's output past this is skipped, but for its newest `TAIL_BYTES`."""
TAIL_BYTES = 8_000
SKIP_POLL_SECONDS = 0.1
"""While skipping, how often the pipe is emptied (the reader is off: no wake-up per write)."""
READ_BYTES = 1 << 20
PIPE_BYTES = 1 << 20
"""The pipe's size asked for on Linux: a second's spew waits there for the next poll, not the server."""


def log_path(log_dir: Path, name: str) -> Path:
    """Where a command server's error output goes."""
    return log_dir / f"{name}.log"


START_MARK = b"--- klaw started MCP server "
SILENT_TAIL_BYTES = 64_000


LAST_WORDS_CHARS = 200
HIDDEN_MIN_CHARS = 4  # a value shorter than this ("1", "on") is no secret, and masking it would garble the line


def said_since_start(log_dir: Path, name: str) -> bool:
    """Whether the server wrote anything to its log since klaw last started it: a server that timed out having
    said nothing (npx still downloading, no network, no Node) needs its command run by hand, not its log read
    (newcomer16). Read after the start's output was copied (its stack closed); an unreadable log says True."""
    said = _since_start(log_dir, name)
    return True if said is None else bool(said.strip())


def last_words(log_dir: Path, name: str, hidden: Iterable[str | None] = ()) -> str | None:
    """The last line the server wrote since klaw last started it, shown characters only, cut to
    `LAST_WORDS_CHARS`, a URL's credentials masked; None when it wrote nothing (or the log cannot be read).
    A server that crashed at its start said why there (`ModuleNotFoundError: No module named 'x'`), and
    "Connection closed (its error output: <file>)" sent the person to a file for one line (newcomer21,
    decision 501). Its last line only: the server's own words for the person (/status, `klaw tools`,
    the model's refusal), never a message's content, and a server printing its settings at start shows
    at most the one line. `hidden`: the values klaw gave it (its `env`'s variables), masked: a server that
    fails saying the key it was given ("invalid API key sk-…") would have put it in chat.log, /status and
    the model's context (decision 506)."""
    said = _since_start(log_dir, name)
    lines = [line.strip() for line in (said or b"").decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return None
    shown = mask_url_credentials("".join(c if c.isprintable() else "?" for c in lines[-1]))
    for value in sorted({value for value in hidden if value and len(value) >= HIDDEN_MIN_CHARS}, key=len, reverse=True):
        shown = shown.replace(value, MASK)
    return shown if len(shown) <= LAST_WORDS_CHARS else shown[: LAST_WORDS_CHARS - 1] + "…"


def _since_start(log_dir: Path, name: str) -> bytes | None:
    """What the log holds since its last start mark (within its last `SILENT_TAIL_BYTES`); None when it
    cannot be read."""
    try:
        with log_path(log_dir, name).open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - SILENT_TAIL_BYTES))
            tail = log.read()
    except OSError:
        return None
    mark = tail.rfind(START_MARK)
    if mark < 0:
        return tail
    return tail[tail.find(b"\n", mark) + 1 :] if b"\n" in tail[mark:] else b""


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
    log.write(START_MARK + f"{name!r} at {when} ---\n".encode())  # before the child's output
    read_fd, write_fd = os.pipe()
    try:
        os.set_blocking(read_fd, False)
        with contextlib.suppress(OSError, AttributeError):  # Linux only, and capped by pipe-max-size
            fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        copy = _Copy(asyncio.get_running_loop(), read_fd, log)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    stack.push_async_callback(copy.drained)
    errlog = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")  # closed by the stack
    stack.callback(errlog.close)  # first: with klaw's end closed, the pipe ends when the child's copy does
    return errlog


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


class _Copy:
    """Reads the server's end of the pipe into its log, at most `RATE_BYTES` a second (see the module)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, log: _BoundedLog) -> None:
        self._loop = loop
        self._fd = fd
        self._log = log
        self._window = loop.time()
        self._budget = RATE_BYTES
        self._skipped = 0
        self._tail = b""
        self._poll: asyncio.TimerHandle | None = None
        self._ended: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        data = self._read()
        if data is None:
            return
        if self._loop.time() - self._window >= 1.0:
            self._window, self._budget = self._loop.time(), RATE_BYTES
        if len(data) <= self._budget:
            self._write(data)
            self._budget -= len(data)
            return
        kept = data.rfind(b"\n", 0, self._budget) + 1  # the second's budget is spent: skip to its end
        self._write(data[:kept])
        self._skip(data[kept:])
        self._budget = 0
        self._loop.remove_reader(self._fd)
        self._poll = self._loop.call_later(SKIP_POLL_SECONDS, self._skipping)

    def _skipping(self) -> None:
        self._poll = None
        for _ in range(2):  # about what the pipe holds: a server writing on meanwhile is not chased
            data = self._read()
            if not data:
                break
            self._skip(data)
        if self._ended.done():
            return
        if self._loop.time() - self._window < 1.0:
            self._poll = self._loop.call_later(SKIP_POLL_SECONDS, self._skipping)
            return
        self._note_skipped()
        self._window, self._budget = self._loop.time(), RATE_BYTES
        self._loop.add_reader(self._fd, self._readable)

    def _read(self) -> bytes | None:
        """The next bytes in the pipe; b"" at its end (the copy ends), None when it is empty for now."""
        try:
            data = os.read(self._fd, READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data:
            self._end()
        return data

    def _skip(self, data: bytes) -> None:
        self._skipped += len(data)
        self._tail = (self._tail + data)[-TAIL_BYTES:]

    def _note_skipped(self) -> None:
        if not self._skipped:
            return
        newline = self._tail.find(b"\n")
        tail = self._tail[newline + 1 :] if 0 <= newline < len(self._tail) - 1 else self._tail
        note = f"[klaw skipped {self._skipped - len(tail)} bytes of output: more than {RATE_BYTES} a second]\n"
        self._skipped, self._tail = 0, b""
        self._write(note.encode() + tail)

    def _write(self, data: bytes) -> None:
        if data:
            with contextlib.suppress(OSError):  # a full disk: the output is lost, the server itself goes on
                self._log.write(data)

    def _end(self) -> None:
        if not self._ended.done():
            self._loop.remove_reader(self._fd)
            self._ended.set_result(None)

    async def drained(self) -> None:
        """At the server's end: what it wrote last comes out (within `DRAIN_SECONDS`), then the pipe closes."""
        if self._poll is not None:
            self._poll.cancel()
            self._poll = None
            self._note_skipped()
            self._budget = 1 << 62  # its last words are kept whatever the rate
            self._loop.add_reader(self._fd, self._readable)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_SECONDS):
                await asyncio.shield(self._ended)
        if self._poll is not None:  # the budget ran out while draining
            self._poll.cancel()
            self._skipping()
            if self._poll is not None:
                self._poll.cancel()
        self._end()
        self._loop.remove_reader(self._fd)
        self._note_skipped()
        os.close(self._fd)


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
