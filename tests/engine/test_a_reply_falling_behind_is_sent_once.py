"""A reply to a connection that falls behind is sent once (decision 544, on decision 535's bound).

The engine wrote a frame into the connection's buffer and then found it past `MAX_UNREAD_BYTES`: it dropped
the connection, telling it why after what it held, and took the frame as not sent, so it was queued for the
channel and flushed at the next hello. The dropped connection's buffer is let out before it closes, so a
reader that came back read that reply too: the same reply twice. The frame that would cross the bound is now
not written at all. In process, the engine's socket server with a 2 MiB bound and a real socket."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from klaw.engine.frames import ErrorFrame, HelloFrame, OutboundFrame, PingFrame, decode_frame, encode_frame
from klaw.engine.socket_server import EngineSocketServer
from tests.engine import GatewayClient, RecordingHandler, short_socket_dir
from tests.engine.test_a_slow_reader_holds_up_no_one import BIG, _read_all


def _stalled_console(path: Path) -> socket.socket:
    """A terminal's place: serves the console channel, reads the pong that answers its hello, then nothing."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(path))
    client.sendall(encode_frame(HelloFrame(channels=["console"])) + encode_frame(PingFrame(id="hi")))
    seen = b""
    while b"\n" not in seen:
        seen += client.recv(4096)
    assert decode_frame(seen.split(b"\n")[0]).type == "pong"
    return client


async def test_the_reply_that_would_cross_the_bound_is_queued_not_also_written() -> None:
    with short_socket_dir() as directory:
        server = EngineSocketServer(directory / "engine.sock", RecordingHandler(), max_unread_bytes=2 << 20)
        await server.start()
        try:
            stalled = await asyncio.to_thread(_stalled_console, server.path)
            written = [
                await server.send_outbound(
                    OutboundFrame(channel="console", chat_id="me", text=f"{n}" * BIG, reply_to=f"m{n}")
                )
                for n in range(6)
            ]
            assert False in written, written  # past the bound: the rest queued for the channel
            old = [str(f.reply_to) for f in await asyncio.to_thread(_read_all, stalled) if isinstance(f, OutboundFrame)]
            stalled.close()
            console = await GatewayClient.connect(server.path)
            await console.send(HelloFrame(channels=["console"]))
            new: list[str] = []
            while len(old) + len(new) < 6:
                got = await asyncio.wait_for(console.recv(), 30)
                assert not isinstance(got, ErrorFrame), got
                if isinstance(got, OutboundFrame):
                    new.append(str(got.reply_to))
            await console.aclose()
            assert sorted(old + new) == [f"m{n}" for n in range(6)], (old, new)
        finally:
            await server.aclose()
