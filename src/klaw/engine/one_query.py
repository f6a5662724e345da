"""One query to the engine on a connection of its own, for a `klaw` command (`klaw tools`, `klaw memory
forget`): the `result` frame answering it, or the engine's own words when it refuses the connection;
`result_for` reads the same on a connection kept open (`klaw mcp serve`).

An engine with as many connections open as it allows (socket_limits.py) writes an `error` frame saying
so and closes at once. Through asyncio's streams a command then met `ConnectionResetError` (its query
written to a closed socket, the transport aborted and the frame in it lost) and said only that. Here
the socket is used directly: a failed send is kept, what the engine wrote is still read from the
socket, and a refusal becomes `EngineRefused` with its sentence.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from klaw.engine.frames import (
    MAX_FRAME_BYTES,
    ErrorFrame,
    FrameError,
    FrameReader,
    QueryFrame,
    ResultFrame,
    decode_frame,
    encode_frame,
)
from klaw.errors import KlawError

READ_BYTES = 1 << 16


class EngineRefused(KlawError, ConnectionError):
    """The engine refused the connection in an `error` frame (it holds as many as it allows); `str()` is
    its sentence, which says what to do."""


async def result_for(reader: FrameReader, frame_id: str) -> ResultFrame:
    """The `result` frame answering the query `frame_id`, other frames (and oversized lines) skipped, for
    a client that asks the engine something; EngineRefused when the engine refuses the connection,
    EOFError when it closes it without answering."""
    while True:
        line = await reader.next()
        if line is None:
            raise EOFError("the engine closed the connection")
        if isinstance(line, int):
            continue
        frame = decode_frame(line)
        if isinstance(frame, ResultFrame) and frame.id == frame_id:
            return frame
        if isinstance(frame, ErrorFrame) and frame.ref is None:  # about the connection; never quotes content
            raise EngineRefused(frame.message)


async def ask(path: Path, query: QueryFrame, timeout_seconds: float) -> ResultFrame:
    """The engine's `result` for `query` (asked on a new connection to `path`, closed after); EngineRefused,
    EOFError (closed without answering), OSError or TimeoutError otherwise."""
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)
        async with asyncio.timeout(timeout_seconds):
            await loop.sock_connect(sock, str(path))
            unsent: OSError | None = None
            try:
                await loop.sock_sendall(sock, encode_frame(query))
            except OSError as exc:  # closed on us: what it said first is still to be read
                unsent = exc
            return await _answer(loop, sock, query.id, unsent)


async def _answer(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, query_id: str | None, unsent: OSError | None
) -> ResultFrame:
    buffer = bytearray()
    while True:
        try:
            chunk = await loop.sock_recv(sock, READ_BYTES)
        except OSError as exc:
            raise unsent or exc from None
        if not chunk:
            raise unsent or EOFError("the engine closed the connection")
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
            try:
                frame = decode_frame(line)
            except FrameError:
                continue
            if isinstance(frame, ResultFrame) and frame.id == query_id:
                return frame
            if isinstance(frame, ErrorFrame) and frame.ref is not None and frame.ref == query_id:
                # the query itself did not decode (decision 532): its words, as a result's error, not a wait
                return ResultFrame(id=query_id, error=frame.message)
            if isinstance(frame, ErrorFrame) and frame.ref is None:  # about the connection; never quotes content
                raise EngineRefused(frame.message)
        if len(buffer) > MAX_FRAME_BYTES * 4:
            raise EOFError("the engine sent a frame too long to read")
