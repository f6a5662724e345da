"""Engine tests. Also holds the helpers the socket tests share: a short socket directory, a recording
frame handler and a minimal gateway client speaking raw bytes over a real Unix socket."""

from __future__ import annotations

import asyncio
import errno
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from klaw.engine.frames import (
    PROTOCOL,
    CommandFrame,
    DeliveredFrame,
    EngineFrame,
    GatewayFrame,
    InboundFrame,
    PingFrame,
    PongFrame,
    decode_frame,
    encode_frame,
)

REPLY_TIMEOUT_SECONDS = 60.0  # a safety net only: every wait is on an actual reply (CI runs on two loaded CPUs)


@contextmanager
def short_socket_dir() -> Iterator[Path]:
    """A fresh directory under /tmp: pytest's tmp_path can exceed the ~107-byte AF_UNIX path limit."""
    path = Path(tempfile.mkdtemp(prefix="klaw-sock-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class RecordingHandler:
    """Records what the server hands over; raises for ids in `fail_ids` (a full disk) and `poison_ids`
    (a bug), with the text in the message, to prove the server does not pass it on."""

    def __init__(self) -> None:
        self.inbound: list[InboundFrame] = []
        self.commands: list[CommandFrame] = []
        self.delivered: list[str] = []
        self.fail_ids: set[str] = set()
        self.poison_ids: set[str] = set()

    async def on_inbound(self, frame: InboundFrame) -> None:
        if frame.id in self.fail_ids:  # a transient fault: the disk is full
            raise OSError(errno.ENOSPC, f"cannot store {frame.text}")
        if frame.id in self.poison_ids:  # a bug met by this message alone
            raise OverflowError(f"cannot store {frame.text}")
        self.inbound.append(frame)

    async def on_delivered(self, frame: DeliveredFrame) -> None:
        self.delivered.append(frame.id)

    async def on_command(self, frame: CommandFrame) -> None:
        if frame.id in self.fail_ids:
            raise OSError(errno.ENOSPC, f"cannot run {frame.args}")
        if frame.id in self.poison_ids:
            raise OverflowError(f"cannot run {frame.args}")
        self.commands.append(frame)


class GatewayClient:
    """The gateway end of one connection, for tests: raw bytes out, decoded frames in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, path: Path) -> GatewayClient:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=4 << 20)
        return cls(reader, writer)

    async def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send(self, frame: GatewayFrame | EngineFrame) -> None:
        await self.send_bytes(encode_frame(frame))

    async def recv(self) -> GatewayFrame | EngineFrame:
        async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
            line = await self.reader.readline()
        assert line.endswith(b"\n"), f"connection closed (got {len(line)} bytes)"
        return decode_frame(line)

    async def recv_until_pong(self, ping_id: str) -> list[GatewayFrame | EngineFrame]:
        """Every frame received before the pong answering `ping_id` (the pong itself excluded)."""
        before: list[GatewayFrame | EngineFrame] = []
        while (frame := await self.recv()) != PongFrame(id=ping_id, protocol=PROTOCOL):
            before.append(frame)
        return before

    async def roundtrip(self, ping_id: str = "sync") -> list[GatewayFrame | EngineFrame]:
        """Ping and wait for the pong: frames are handled in order, so everything sent before is done."""
        await self.send(PingFrame(id=ping_id))
        return await self.recv_until_pong(ping_id)

    async def read_to_eof(self) -> bytes:
        """What is left until the engine closes the connection."""
        async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
            return await self.reader.read()

    async def aclose(self) -> None:
        self.writer.close()
        with suppress(OSError):
            await self.writer.wait_closed()
