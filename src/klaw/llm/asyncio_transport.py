"""httpx's HTTP/1.1 transport on plain asyncio streams: a model request's bytes without anyio's per-call work.

httpx reaches the network through httpcore, whose default backend on asyncio is anyio: every read and
write of a request opens a cancel scope with a deadline (`fail_after`), a write adds a shielded
checkpoint, and the idle-connection check before each reuse builds anyio's socket attributes (a
`getpeername` system call). With 50 chats at once this was ~0.5 ms of the event loop's CPU a model
request (decision 220). httpcore lets the network layer be swapped (`AsyncNetworkBackend`); this one is
asyncio's own streams, with `asyncio.timeout` only when a timeout is set. It also sends a request in one
piece: httpcore writes the headers and then the body, two system calls, each waking the model server;
the stream keeps written bytes until httpcore starts reading the response (or the pending bytes pass
`_FLUSH_BYTES`), then sends them together. httpx above it is unchanged: the client, TLS context, limits
and errors. A client given a transport ignores the environment's proxies, so `llm/http.new_http_client`
uses this one only when the environment names none (decision 318).
"""

# ruff: noqa: ASYNC109  (the `timeout` parameters are httpcore's network interface, applied with asyncio.timeout)
from __future__ import annotations

import asyncio
import functools
import os
import ssl
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

# Pending request bytes are sent at once past this size, so a large body never waits whole in memory
# before its first byte leaves.
_FLUSH_BYTES = 256 * 1024
# httpx's own defaults (httpx._config.DEFAULT_LIMITS, private there).
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)


def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certificates verified against SSL_CERT_FILE, SSL_CERT_DIR or certifi's
    bundle, as httpx reads them), shared by every model client and the chat's preflight while those
    variables stay the same: loading a CA bundle took 60-250 ms here (over 400 ms on a loaded machine),
    paid by each new client before, so by each engine start (decision 239). A context is meant to be
    shared; its settings are never changed after it is made."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the same two variables


def no_tls_context() -> ssl.SSLContext:
    """The TLS context of a client that makes no TLS connection (its base URL is http://, it follows no
    redirect): verifying, and trusting no certificate, so a TLS connection asked of it fails instead of going
    unverified. Making it loads no CA bundle: an engine on a local http:// model loads none at start
    (decision 411)."""
    return _no_tls_context()


@functools.cache
def _no_tls_context() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname by default


class AsyncioTransport(httpx.AsyncHTTPTransport):
    """`httpx.AsyncHTTPTransport` whose connection pool runs on `backend` (a new `AsyncioBackend` if none);
    `tls=False` for a client of an http:// base URL (`no_tls_context`)."""

    def __init__(self, backend: AsyncioBackend | None = None, *, tls: bool = True) -> None:
        context = tls_context() if tls else no_tls_context()  # one for both pools
        super().__init__(verify=context, limits=_LIMITS)
        # The parent builds its pool with httpcore's default backend and offers no parameter for another;
        # it keeps the pool in `_pool`, which its request and close methods use (tests/llm/test_asyncio_transport
        # fails if a new httpx stops doing so).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=backend or AsyncioBackend(),
        )


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Connections as asyncio streams; `connections` counts those opened (for tests)."""

    def __init__(self) -> None:
        self.connections = 0

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        with _mapped(httpcore.ConnectError, httpcore.ConnectTimeout):
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, local_addr=local)
        return self._opened(reader, writer, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        with _mapped(httpcore.ConnectError, httpcore.ConnectTimeout):
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path)
        return self._opened(reader, writer, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def _opened(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, socket_options: Iterable[Any] | None
    ) -> AsyncioStream:
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        self.connections += 1
        return AsyncioStream(reader, writer)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection; written bytes wait in `_pending` until the next read (see the module's docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:
            await self._flush(timeout)
        with _mapped(httpcore.ReadError, httpcore.ReadTimeout):
            if timeout is None:
                return await self._reader.read(max_bytes)
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._pending.append(buffer)
        self._pending_bytes += len(buffer)
        if self._pending_bytes >= _FLUSH_BYTES:
            await self._flush(timeout)

    async def _flush(self, timeout: float | None) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        with _mapped(httpcore.WriteError, httpcore.WriteTimeout):
            self._writer.write(data)
            async with asyncio.timeout(timeout):
                await self._writer.drain()

    async def aclose(self) -> None:
        self._pending.clear()
        self._writer.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        with _mapped(httpcore.ConnectError, httpcore.ConnectTimeout):
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # An idle connection the server closed: asyncio has already read its end (EOF) into the reader.
            return self._reader.at_eof() or self._reader.exception() is not None
        if info in ("ssl_object", "socket"):
            return self._writer.get_extra_info(info)
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        return None


@contextmanager
def _mapped(error: type[httpcore.NetworkError], timed_out: type[httpcore.TimeoutException]) -> Iterator[None]:
    """OS and TLS failures and timeouts as the httpcore errors httpx maps to its own."""
    try:
        yield
    except TimeoutError as exc:
        raise timed_out(str(exc) or "timed out") from exc
    except EOFError as exc:
        raise error(str(exc) or "the server closed the connection") from exc
    except (OSError, ssl.SSLError) as exc:
        raise error(str(exc) or "the connection failed") from exc
