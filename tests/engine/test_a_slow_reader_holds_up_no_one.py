"""A socket client that stops reading holds up no other client's replies (decision 535, item 5).

Every frame the engine wrote waited for its reader, up to 10 s: a piped `klaw chat` or a watcher beside a
terminal that stopped reading (suspended, stuck) held the console's reply that long, once, before the engine
dropped it. Now what a turn sends goes into each connection's own buffer without waiting; a connection that
falls more than `MAX_UNREAD_BYTES` behind is dropped, told why in a last frame, and the others go on.

The first test runs `klaw serve` as a person does, with two clients on its socket: the console (a terminal's
place, reading) and a watcher of the console chat (a pipe beside it, decision 527) that reads its hello's
answer and then nothing. The second drives the engine's socket server in process with a small bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

from klaw.engine.frames import (
    ErrorFrame,
    HelloFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    decode_frame,
    encode_frame,
)
from klaw.engine.socket_server import EngineSocketServer
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.engine import REPLY_TIMEOUT_SECONDS, GatewayClient, RecordingHandler, short_socket_dir
from tests.serve_helpers import running, web_page

BIG = 900_000  # characters of reply: more than the kernel's socket buffer and the writer's high-water mark


def _stalled_watcher(path: Path, channel: str = "console") -> socket.socket:
    """A client that says hello watching `channel`, reads the pong that answers it, then reads nothing."""
    watcher = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    watcher.connect(str(path))
    watcher.sendall(encode_frame(HelloFrame(channels=[], watching=[channel])) + encode_frame(PingFrame(id="hi")))
    seen = b""
    while b"\n" not in seen:
        seen += watcher.recv(4096)
    assert decode_frame(seen.split(b"\n")[0]).type == "pong"
    return watcher


def _read_all(watcher: socket.socket) -> list[OutboundFrame | ErrorFrame]:
    """Everything the engine wrote to the watcher until it closes it (or it goes quiet for a while)."""
    watcher.settimeout(REPLY_TIMEOUT_SECONDS / 4)
    data = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while chunk := watcher.recv(1 << 20):
            data += chunk
    frames = [decode_frame(line) for line in data.split(b"\n")[:-1] if line]
    return [f for f in frames if isinstance(f, OutboundFrame | ErrorFrame)]


async def test_a_watcher_that_stops_reading_does_not_hold_up_the_consoles_reply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            console = await GatewayClient.connect(home / "engine.sock")
            await console.send(HelloFrame(channels=["console"]))
            await console.roundtrip()
            watcher = await asyncio.to_thread(_stalled_watcher, home / "engine.sock")
            try:
                model.reply_text("y" * BIG)
                asked = InboundFrame(id="m1", channel="console", chat_id="me", text="a long one", whole=True)
                await console.send(asked)
                while not isinstance(reply := await console.recv(), OutboundFrame) or reply.reply_to != "m1":
                    pass
                assert len(reply.text) == BIG
                # The reply came while the watcher still held its copy unread: the engine did not wait for it to
                # read (before, it waited 10 s, then dropped the watcher, its copy cut off), nor drop it.
                copies = await asyncio.to_thread(_read_all, watcher)
                assert [(c.type, getattr(c, "reply_to", None)) for c in copies] == [("outbound", "m1")], copies
                assert isinstance(copies[0], OutboundFrame) and copies[0].text == reply.text
            finally:
                watcher.close()
                await console.aclose()


async def test_a_connection_that_falls_too_far_behind_is_dropped_and_told_the_others_go_on() -> None:
    with short_socket_dir() as directory:
        server = EngineSocketServer(directory / "engine.sock", RecordingHandler(), max_unread_bytes=2 << 20)
        await server.start()
        try:
            console = await GatewayClient.connect(server.path)
            await console.send(HelloFrame(channels=["console"]))
            await console.roundtrip()
            watcher = await asyncio.to_thread(_stalled_watcher, server.path)
            for n in range(6):  # 6 × ~900 KB: past the 2 MiB bound even with the kernel's buffer full
                frame = OutboundFrame(channel="console", chat_id="me", text=f"{n}" * BIG, reply_to=f"m{n}")
                assert await server.send_outbound(frame)  # written at once to the console
                got = await console.recv()
                assert isinstance(got, OutboundFrame) and got.reply_to == f"m{n}"
            said = await asyncio.to_thread(_read_all, watcher)
            last = said[-1]
            assert isinstance(last, ErrorFrame) and last.code == "refused", last
            assert "this connection fell behind" in last.message and "connect again" in last.message
            assert all(isinstance(f, OutboundFrame) for f in said[:-1]) and 0 < len(said) - 1 < 6
            await console.roundtrip()  # the console is still served
            watcher.close()
            await console.aclose()
        finally:
            await server.aclose()
