"""The gateway's durable inbound buffer: every message is on disk before it goes to the engine.

A message a person sent is appended (fsync'd) to `KLAW_HOME/gateway/inbound.jsonl` first, exactly
as the frame that goes on the wire; it stays pending until the engine acknowledges it, and an
`{"ack": id}` line (fsync'd too) records that. So whether the engine is down, is killed while a
frame is in flight, or the gateway itself restarts, the pending frames are sent again in their
original order with their original ids; the engine's ingestion is idempotent on message id, so a
frame whose ack was lost is stored once. When nothing is pending the file is emptied, so it stays
small. A torn last line (a crash mid-append) is skipped with a warning naming the line, never its
text. File and directory are private (0600 / 0700): they hold message text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from klaw import strict_json
from klaw.atomic_file import append_whole
from klaw.bounded_lines import numbered_lines
from klaw.engine.frames import MAX_FRAME_BYTES, CommandFrame, FrameError, InboundFrame, decode_frame, encode_frame
from klaw.errors import KlawError
from klaw.private_files import open_private, private_dirs

log = logging.getLogger(__name__)

BufferedFrame = InboundFrame | CommandFrame
FILE_NAME = "inbound.jsonl"
COMPACT_AFTER_LINES = 256  # rewrite the file once this many lines hold nothing pending


class BufferUnavailable(KlawError, RuntimeError):
    """The buffer's disk refused a message (full, read-only, failing); the message says what to do
    and never quotes the message. Nothing was buffered: the channel tells the person to send it again."""


class InboundBuffer:
    """Pending frames in arrival order; one writer at a time (an asyncio lock), disk work off the loop."""

    def __init__(self, path: Path, pending: OrderedDict[str, BufferedFrame], lines: int) -> None:
        self.path = path
        self._pending = pending
        self._lines = lines  # lines in the file, pending or not
        self._lock = asyncio.Lock()
        self._changed = asyncio.Condition()
        self.acked = 0  # acknowledged since opened

    @classmethod
    async def open(cls, directory: Path) -> InboundBuffer:
        """Read what an earlier run left pending (in order) and compact the file."""
        path = directory / FILE_NAME
        pending = await asyncio.to_thread(_load, directory, path)
        buffer = cls(path, pending, 0)
        async with buffer._lock:
            await asyncio.to_thread(buffer._rewrite)
        if pending:
            log.info("gateway buffer: %d message(s) pending from before, to be sent first", len(pending))
        return buffer

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, frame_id: object) -> bool:
        return frame_id in self._pending

    def first(self) -> BufferedFrame | None:
        """The oldest frame not yet acknowledged: the next to send."""
        return next(iter(self._pending.values()), None)

    def pending(self) -> list[BufferedFrame]:
        return list(self._pending.values())

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds; it is checked after every append and ack (status, tests)."""
        async with self._changed:
            await self._changed.wait_for(predicate)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def append(self, frame: BufferedFrame) -> bool:
        """Make `frame` durable; False (and nothing written) if a frame with its id is already pending.

        Raises `FrameError("frame_too_large")` for a frame the engine could never accept, and
        `BufferUnavailable` (a sentence for the person) when the disk cannot take it (full, failing)."""
        return await self.add(frame) is None

    async def add(self, frame: BufferedFrame) -> BufferedFrame | None:
        """`append`, answering the frame already pending under `frame.id` (nothing written), else None: a web
        message sent again under a `client_id` the buffer holds with another text is refused, not dropped
        unseen while the engine is down (decision 500)."""
        line = encode_frame(frame)
        async with self._lock:
            if (held := self._pending.get(frame.id)) is not None:
                return held
            try:
                await asyncio.to_thread(self._write, line)
            except OSError as exc:
                log.error("gateway buffer %s: could not save a message (%s)", self.path, exc.strerror)
                raise BufferUnavailable(
                    f"the gateway could not save this message ({exc.strerror or type(exc).__name__}"
                    f" in {self.path.parent}); it was not sent. Free some disk space, then send it again."
                ) from exc
            self._pending[frame.id] = frame
        await self._notify()
        return None

    async def ack(self, frame_id: str) -> bool:
        """The engine has the frame: forget it (durably). False for an id that is not pending."""
        async with self._lock:
            if frame_id not in self._pending:
                return False
            if len(self._pending) == 1 or self._lines >= COMPACT_AFTER_LINES + len(self._pending):
                del self._pending[frame_id]
                await asyncio.to_thread(self._rewrite)
            else:
                await asyncio.to_thread(self._write, json.dumps({"ack": frame_id}).encode() + b"\n")
                del self._pending[frame_id]
            self.acked += 1
        await self._notify()
        return True

    def _write(self, line: bytes) -> None:
        """Append and fsync one line, or leave the file as it was (a write cut short by a full disk
        is truncated away, so no torn line is left for the next append)."""
        fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            append_whole(fd, line, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        self._lines += 1

    def _rewrite(self) -> None:
        """Replace the file by the pending frames alone (atomically: temp file, fsync, rename)."""
        temp = self.path.with_name(self.path.name + ".tmp")
        fd = open_private(temp, os.O_WRONLY | os.O_TRUNC)
        try:
            for frame in self._pending.values():
                os.write(fd, encode_frame(frame))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self.path)
        _fsync_dir(self.path.parent)
        self._lines = len(self._pending)


def _load(directory: Path, path: Path) -> OrderedDict[str, BufferedFrame]:
    private_dirs(directory)
    pending: OrderedDict[str, BufferedFrame] = OrderedDict()
    if not path.exists():
        return pending
    with path.open("rb") as file:
        for number, line in numbered_lines(file, MAX_FRAME_BYTES + 1):  # a frame and its line end
            if line is None:  # never a frame: skipped without being held (decision 329)
                log.warning("gateway buffer %s:%d: skipping a line longer than a frame may be", path, number)
                continue
            if not line.strip():
                continue
            try:
                marker = strict_json.loads(line)  # a line nested too deep must not stop the gateway
                if isinstance(marker, dict) and set(marker) == {"ack"}:
                    pending.pop(str(marker["ack"]), None)
                    continue
                frame = decode_frame(line)
            except (ValueError, FrameError) as exc:  # StrictJsonError is a ValueError; neither quotes the line
                reason = exc.code if isinstance(exc, FrameError) else str(exc)
                log.warning("gateway buffer %s:%d: skipping an unreadable line (%s)", path, number, reason)
                continue
            if isinstance(frame, InboundFrame | CommandFrame):
                pending.setdefault(frame.id, frame)
            else:
                log.warning("gateway buffer %s:%d: skipping a %s frame", path, number, frame.type)
    return pending


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pending_in(directory: Path) -> int:
    """How many messages the buffer in `directory` holds that the engine has not acknowledged yet: what
    waits for it while it is down (`klaw status`, decision 510); read only, nothing made when there is none."""
    path = directory / FILE_NAME
    return len(_load(directory, path)) if path.exists() else 0
