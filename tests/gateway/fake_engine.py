"""A scripted engine end of the socket, for link tests: decides per frame to ack, refuse or hang up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from klaw.engine.frames import (
    AckFrame,
    CommandFrame,
    ErrorFrame,
    FrameReader,
    GatewayFrame,
    HelloFrame,
    InboundFrame,
    PingFrame,
    PongFrame,
    decode_frame,
    encode_frame,
)

Decision = Literal["ack", "hang_up", "internal", "invalid", "silent"]
Policy = Callable[[InboundFrame | CommandFrame, int], Decision]  # frame, times seen (1 = first)


def always_ack(frame: InboundFrame | CommandFrame, seen: int) -> Decision:
    return "ack"


class FakeEngine:
    def __init__(self, path: Path, policy: Policy = always_ack) -> None:
        self.path = path
        self.policy = policy
        self.received: list[GatewayFrame] = []
        self.hellos: list[HelloFrame] = []
        self.connections = 0
        self.changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await self._server.wait_closed()
            self._server = None
        self.path.unlink(missing_ok=True)

    def ids(self) -> list[str]:
        return [f.id for f in self.received if isinstance(f, InboundFrame | CommandFrame)]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(predicate)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        lines = FrameReader(reader)
        try:
            while isinstance(line := await lines.next(), bytes):
                frame = decode_frame(line)
                decision: Decision = "silent"
                if isinstance(frame, HelloFrame):
                    self.hellos.append(frame)
                elif isinstance(frame, PingFrame):  # as the engine does: a gateway pings after its hello
                    writer.write(encode_frame(PongFrame(id=frame.id)))
                elif isinstance(frame, InboundFrame | CommandFrame):
                    self.received.append(frame)
                    decision = self.policy(frame, self.ids().count(frame.id))
                async with self.changed:
                    self.changed.notify_all()
                if decision == "hang_up":
                    return
                if decision == "ack":
                    assert isinstance(frame, InboundFrame | CommandFrame)
                    writer.write(encode_frame(AckFrame(id=frame.id)))
                elif decision in ("internal", "invalid"):
                    assert isinstance(frame, InboundFrame | CommandFrame)
                    code: Literal["internal", "invalid_frame"] = "internal"
                    if decision == "invalid":
                        code = "invalid_frame"
                    writer.write(encode_frame(ErrorFrame(code=code, message="refused", ref=frame.id)))
                await writer.drain()
        except OSError:
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
