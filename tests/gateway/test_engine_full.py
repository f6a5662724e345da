"""An engine holding as many connections as it allows (a buggy local client keeps 256 open): `klaw
gateway` says once that the engine refused it, in the engine's words, and backs off, never "the
engine is back" until a hello is answered; `klaw tools` and `klaw mcp serve`'s link show the engine's
refusal sentence (not "start the engine"). Once the connections close, the gateway reaches the engine,
said once.

Real processes: `klaw engine`, `klaw gateway` (its stderr read as a person at its terminal would) and
`klaw tools`; the held connections are this test's.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from klaw.engine.socket_limits import MAX_CONNECTIONS
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.mcp_server.memory_link import MemoryUnavailable, SocketMemory
from klaw.store.records import ChatRef
from tests.engine import GatewayClient, short_socket_dir
from tests.gateway.test_engine_killed_mid_burst import write_config
from tests.serve_helpers import EngineProcess, Lines, serve_env, stop

REFUSAL = f"the engine already has {MAX_CONNECTIONS} connections open, its limit"


async def test_a_full_engine_is_said_in_its_words_once_and_the_gateway_backs_off() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as model:
            write_config(home, model.base_url, web=True)
            engine = EngineProcess(home)
            await engine.start()
            held: list[GatewayClient] = []
            gateway: asyncio.subprocess.Process | None = None
            env = serve_env(home.root, COLUMNS="200")
            try:
                for _ in range(MAX_CONNECTIONS):
                    held.append(await _taken_in(home.socket_path))

                gateway = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "klaw", "gateway", env=env,
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                assert gateway.stderr is not None
                said = Lines(gateway.stderr)
                refused = await said.until("refused this gateway's connection")
                assert REFUSAL in refused and "buffer" in refused

                tools = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "klaw", "tools", env=env,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                out, err = await tools.communicate()
                listing = " ".join((out + err).decode().split())
                assert f"did not answer: {REFUSAL}" in listing, listing
                assert "ConnectionResetError" not in listing

                link = SocketMemory(home, ChatRef("web", "main"))  # `klaw mcp serve`'s way to the engine
                with pytest.raises(MemoryUnavailable, match=f"refused this MCP server's connection: {REFUSAL}"):
                    await link.call("memory_search", {"query": "anything"})
                await link.aclose()

                await asyncio.sleep(3)  # reconnect attempts (0.2 s doubling) go by
                for client in held:
                    client.writer.close()
                back = await said.until("reached the engine after")
                assert "0 buffered message(s)" in back
            finally:
                for client in held:
                    client.writer.transport.abort()
                if gateway is not None:
                    await stop(gateway)
                await engine.stop(signal.SIGTERM)
    seen = "".join(said.seen)
    assert seen.count("refused this gateway's connection") == 1, seen
    assert "lost the engine" not in seen and "the engine is back" not in seen, seen
    assert "Traceback" not in seen


async def _taken_in(path: Path) -> GatewayClient:
    """A connection the engine took in (its ping answered). The engine may still count a connection
    that just closed (the start-up check's): the last slot is then refused until it sees that close."""
    for _ in range(100):
        client = await GatewayClient.connect(path)
        try:
            await client.roundtrip()
            return client
        except (OSError, EOFError, AssertionError):
            client.writer.transport.abort()
            await asyncio.sleep(0.05)
    raise AssertionError("the engine never took a connection in")
