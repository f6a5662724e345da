"""`klaw serve` and `klaw engine` with a model that does not answer (a container's default Ollama address):
they start, as a service must (the model may come up later), but say so in one line at once, with the words
`klaw chat` refuses with, instead of leaving it to the first message's "could not reach the server"."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import ssl
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, read_until, running, serve_config, serve_env, stop, write_serve_home
from tests.tls import self_signed


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


async def _terminal_until(terminal: int, text: str, who: str) -> str:
    """What the service wrote on its terminal (a pty as its stderr) up to `text`, white space folded."""
    seen = b""
    async with asyncio.timeout(STARTS_WITHIN):
        while text not in " ".join(seen.decode(errors="replace").split()):
            chunk = await asyncio.to_thread(os.read, terminal, 4096)
            assert chunk, f"{who} ended before saying {text!r}: {seen!r}"
            seen += chunk
    return " ".join(seen.decode(errors="replace").split())


@pytest.mark.parametrize("command", ["serve", "engine"])
async def test_a_stop_signal_stops_a_service_whose_model_check_trickles(command: str) -> None:
    server = await asyncio.start_server(_trickle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    terminal, its_side = pty.openpty()  # stderr at a terminal, as a person runs it: the starting line is for them
    try:
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config(f"http://127.0.0.1:{port}/v1"))
            async with running("-m", "klaw", command, env=serve_env(home), stderr=its_side) as process:
                os.close(its_side)
                its_side = -1
                if command == "serve":
                    await read_until(process.stdout, "web page:")
                    said = await _terminal_until(terminal, "klaw serve starting on", "klaw serve")
                else:
                    said = await _terminal_until(terminal, "klaw engine listening on", "klaw engine")
                # said at once, before the slow part of the start (newcomer16: 20 s of nothing under load)
                assert f"klaw {command} starting on {home}… (it says when it is ready)" in said, said
                assert await stop(process, signal.SIGINT) == 0  # the old code waited for the check, for ever
    finally:
        server.close()
        os.close(terminal)
        if its_side >= 0:
            os.close(its_side)


SIGN_IN_PAGE = b"<html><body>Sign in to the hotel network: secret-room-4711</body></html>"


async def _sign_in_page(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A captive portal (or another program's web page on the port): HTTP 200, HTML, for any request."""
    with suppress(ConnectionError, asyncio.IncompleteReadError):
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: %d\r\n\r\n"
        writer.write(head % len(SIGN_IN_PAGE) + SIGN_IN_PAGE)
        await writer.drain()
    writer.close()


async def _endless_page(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """HTTP 200, HTML, chunked, never ending: a wrong port that streams, or a hostile network."""
    with suppress(ConnectionError, asyncio.IncompleteReadError):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b"<p>" + b"x" * 65530 + b"</p>"
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
    writer.close()


@pytest.mark.parametrize("page", ["sign-in", "endless"])
@pytest.mark.parametrize("command", ["serve", "engine", "chat"])
async def test_a_model_address_answering_a_web_page_is_named_at_start(command: str, page: str) -> None:
    """lows19: a 200 that is not JSON (a captive portal) passed the check in silence; the warning (or
    `klaw chat`'s refusal) says what came back, by its content type only, and what to fix. adversary20: a page
    without end was read whole (2.6 GB in 16 s before the check's deadline, and `klaw serve` kept the memory);
    a few MB are read, the page is judged by its content type, and it is said at once."""
    server = await asyncio.start_server(_sign_in_page if page == "sign-in" else _endless_page, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config(url))
            said = await _said_at_start(home, command, _peak_under_600_mb)
            assert f"at {url} (routing.default = fake/small in {home / 'engine.yaml'})" in said
            assert "GET /models answered HTTP 200 with text/html, not JSON" in said, said
            assert "Check models.fake/small.baseUrl (host, port and the /v1 path)" in said
            assert "secret-room" not in said and "Traceback" not in said and "no complete answer" not in said
    finally:
        server.close()


async def test_a_service_whose_model_path_answers_a_404_page_says_so_at_start() -> None:
    """lows20: a baseUrl at `/v2` of a server whose API is at `/v1` passed the start check in silence; the
    warning names the URL that answered 404 and the usual /v1 path, without the unreachable model's words."""
    async with FakeOpenAiServer() as model:
        root = model.base_url.removesuffix("/v1")
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config(f"{root}/v2"))
            async with running("-m", "klaw", "serve", env=serve_env(home)) as process:
                said = await read_until(process.stderr, "goes on", who="klaw serve")
                assert await stop(process) == 0
    assert f"warning: GET {root}/v2/models answered HTTP 404, not JSON" in said
    assert f"set models.fake/small.baseUrl: {root}/v1" in said and "klaw serve goes on." in said
    assert "once the model answers" not in said and "no model server answered" not in said


async def _said_at_start(home: Path, command: str, while_running: Callable[[int], None] = lambda pid: None) -> str:
    """What the start check said: `klaw chat`'s refusal, or a service's warning (the service going on; then
    `while_running(pid)` and a clean stop)."""
    if command == "chat":
        return await _chat_refused(home)
    async with running("-m", "klaw", command, env=serve_env(home)) as process:
        said = await read_until(process.stderr, "goes on", who=f"klaw {command}")
        assert f"klaw {command} goes on" in said
        while_running(process.pid)
        assert await stop(process) == 0
    return said


def _peak_under_600_mb(pid: int) -> None:
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    peak_kb = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
    assert peak_kb < 600 * 1024, f"the service peaked at {peak_kb} kB"


async def _chat_refused(home: Path) -> str:
    """What `klaw chat` said on stderr, one line, when it refused to start (exit 2)."""
    chat = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", "chat", env={**serve_env(home), "COLUMNS": "300"},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(chat.communicate(), 60)
    said = " ".join(err.decode().split())
    assert chat.returncode == 2, said
    return said


async def _tls_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{"data": []}')
        await writer.drain()


@pytest.mark.parametrize("command", ["engine", "chat"])
async def test_an_http_address_of_a_tls_port_is_told_to_use_https(command: str, tmp_path: Path) -> None:
    """lows19: http:// to an https server's port read "the server closed the connection without an answer";
    the check tries a TLS handshake there and says to use https://, with the baseUrl to set."""
    cert, key = self_signed(tmp_path, "localhost")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server = await asyncio.start_server(_tls_answer, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    try:
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config(f"http://127.0.0.1:{port}/v1"))
            said = await _said_at_start(home, command)
            if command == "chat":
                assert f"Set models.fake/small.baseUrl: https://127.0.0.1:{port}/v1" in said
            assert "this port speaks TLS: use https://" in said and "Traceback" not in said
            assert "ollama pull" not in said  # the fix is the scheme, not another server
    finally:
        server.close()


@pytest.mark.parametrize("command", ["engine", "chat"])
async def test_an_https_address_of_a_plain_http_port_is_told_to_use_http(command: str) -> None:
    """lows20: https:// to a plain HTTP server's port read "the TLS handshake failed (WRONG_VERSION_NUMBER)"
    above the Ollama set-up steps; the check asks the port with plain HTTP and says to use http://, with the
    baseUrl to set, and no Ollama steps."""
    async with FakeOpenAiServer() as model:
        plain = model.base_url
        secure = "https://" + plain.removeprefix("http://")
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config(secure))
            said = await _said_at_start(home, command)
    assert f"at {secure} (routing.default = fake/small in" in said
    assert "this port speaks plain HTTP: use http:// (the TLS handshake failed" in said
    assert f"Set models.fake/small.baseUrl: {plain}" in said
    assert "ollama pull" not in said and "Traceback" not in said
