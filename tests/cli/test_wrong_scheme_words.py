"""`klaw chat` with a baseUrl whose port speaks the other scheme, at start and when a turn fails: an http://
address of a TLS port that answers plain HTTP with HTTP 400 (nginx, Go's net/http, answering here byte for
byte as they do) or closes the connection (Python's TLS server), and an https:// address of a plain HTTP
port. Each says which scheme the port speaks and the baseUrl to set, instead of a bare HTTP 400, "the server
closed the connection without an answer" or "the TLS handshake failed" (lows20)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped, piped_bytes, refused
from tests.tls import self_signed

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

NGINX_PAGE = (
    b"<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n"
    b"<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n"
    b"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


async def _nginx(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """nginx's answer (its code 497) to plain HTTP on a `listen … ssl` port."""
    with suppress(ConnectionError, asyncio.IncompleteReadError):
        await reader.readuntil(b"\r\n\r\n")
        head = (
            b"HTTP/1.1 400 Bad Request\r\nServer: nginx/1.22.1\r\nDate: Sat, 28 Nov 2026 22:00:00 GMT\r\n"
            b"Content-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        )
        writer.write(head % len(NGINX_PAGE) + NGINX_PAGE)
        await writer.drain()
    writer.close()


async def _go(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Go's net/http TLS server (Caddy's too): one read of what came, then these bytes, then close."""
    with suppress(ConnectionError):
        await reader.read(65536)
        writer.write(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
        await writer.drain()
    writer.close()


@asynccontextmanager
async def _serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    init_home(home)
    return home


async def _turn(env: dict[str, str]) -> str:
    """What `echo hello | klaw chat --skip-check` said when its turn failed (exit 1), on one line."""
    code, out, err = await piped_bytes(env, b"hello", "--skip-check")
    said = " ".join((out + err).split())
    assert code == 1 and "Traceback" not in said, said
    return said


@pytest.mark.parametrize("server", [_nginx, _go], ids=["nginx", "go"])
async def test_a_tls_ports_http_400_is_told_to_use_https_at_start_and_in_a_turn(
    server: Handler, tmp_path: Path
) -> None:
    """Before: the start check let the HTTP 400 pass in silence, and the turn said a bare "the server rejected
    the request (HTTP 400)" with the model-name hint."""
    home = _home(tmp_path)
    async with _serving(server) as port:
        env = chat_env(home, f"http://127.0.0.1:{port}/v1")
        line = refused(*await piped(env, "hello"))
        assert f"No model server answered at http://127.0.0.1:{port}/v1 (routing.default = FAKE by" in line
        assert "this port speaks TLS: use https:// (it answered HTTP 400 with a TLS port's words" in line
        assert f"Set models.FAKE.baseUrl: https://127.0.0.1:{port}/v1" in line and "ollama pull" not in line
        said = await _turn(env)
        assert "the server rejected the request (HTTP 400): this port speaks TLS: use https://" in said
        assert f"Set baseUrl under models.FAKE: https://127.0.0.1:{port}/v1" in said
        assert "Check the model name" not in said


async def test_a_turn_to_a_tls_port_that_closes_plain_http_is_told_to_use_https(tmp_path: Path) -> None:
    """The start check said so already (lows19); the turn said "the server closed the connection without an
    answer" and to check that the server runs."""
    cert, key = self_signed(tmp_path, "localhost")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def nothing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()  # the handshake of a plain request fails before this runs

    async with _serving(nothing, served) as port:
        said = await _turn(chat_env(_home(tmp_path), f"http://127.0.0.1:{port}/v1"))
    assert "could not reach the server after 1 attempt(s): this port speaks TLS: use https:// (" in said
    assert f"Set baseUrl under models.FAKE: https://127.0.0.1:{port}/v1" in said


async def test_a_turn_to_a_plain_port_over_https_is_told_to_use_http(tmp_path: Path) -> None:
    """Before: "the TLS handshake failed (WRONG_VERSION_NUMBER)" and to check that the server runs."""
    async with FakeOpenAiServer() as model:
        plain = model.base_url
        said = await _turn(chat_env(_home(tmp_path), "https://" + plain.removeprefix("http://")))
        assert model.chat_requests == []
    assert "could not reach the server after 1 attempt(s): this port speaks plain HTTP: use http:// (the TLS" in said
    assert f"Set baseUrl under models.FAKE: {plain}" in said
