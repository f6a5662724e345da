"""`klaw serve` and `klaw engine` with a model that does not answer (a container's default Ollama address):
they start, as a service must (the model may come up later), but say so in one line at once, with the words
`klaw chat` refuses with, instead of leaving it to the first message's "could not reach the server"."""

from __future__ import annotations

import asyncio
import signal
from contextlib import suppress

import pytest

from tests.engine import short_socket_dir
from tests.serve_helpers import read_until, running, serve_config, serve_env, stop, write_serve_home


@pytest.mark.parametrize("command", ["serve", "engine"])
async def test_a_service_names_an_unreachable_model_at_start_and_runs_on(command: str) -> None:
    with short_socket_dir() as directory:
        home = write_serve_home(directory / "home", serve_config("http://127.0.0.1:9/v1"))
        async with running("-m", "klaw", command, env=serve_env(home)) as process:
            said = await read_until(process.stderr, "goes on", who=f"klaw {command}")
            assert "no model server answered at http://127.0.0.1:9/v1" in said
            assert f"(routing.default = fake/small in {home / 'engine.yaml'})" in said
            assert f"klaw {command} goes on: chats are answered once the model answers." in said
            assert "ollama pull" not in said  # one line, not chat's whole refusal
            assert process.returncode is None
            if command == "serve":
                await read_until(process.stdout, "web page:")
            elif "klaw engine listening on" not in said:  # the warning may come first or after
                await read_until(process.stderr, "klaw engine listening on", who="klaw engine")
            assert await stop(process) == 0


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A model server that sends one byte of headers every 2 s, for ever: each read is within httpx's
    5 s, so only a deadline on the whole check ends it."""
    await reader.read(1000)
    with suppress(ConnectionError):
        for byte in b"HTTP/1.1 200 OK\r\nX-a: " + b"a" * 100000:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(2)


@pytest.mark.parametrize("command", ["serve", "engine"])
async def test_a_stop_signal_stops_a_service_whose_model_check_trickles(command: str) -> None:
    server = await asyncio.start_server(_trickle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config(f"http://127.0.0.1:{port}/v1"))
            async with running("-m", "klaw", command, env=serve_env(home)) as process:
                if command == "serve":
                    await read_until(process.stdout, "web page:")
                else:
                    await read_until(process.stderr, "klaw engine listening on", who="klaw engine")
                assert await stop(process, signal.SIGINT) == 0  # the old code waited for the check, for ever
    finally:
        server.close()
