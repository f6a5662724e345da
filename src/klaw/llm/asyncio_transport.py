"""httpx's transport for model requests: HTTP/1.1 over asyncio's own streams, with a pool of kept-alive
connections, in a few steps a request.

httpx reached the network through httpcore's connection pool and h11. Decision 220 swapped httpcore's
anyio backend for asyncio streams; what was left (httpcore's pool, connection and request objects, its
locks and shielded cancel scopes; h11's event objects, state machine and header checks) was still
~1.5 ms of the event loop's CPU a request, a tenth of a sequential turn's (decision 287). This transport
does a request in three steps: the request's head and body written in one `write` (its body's pieces
past `SEND_BYTES` written after it), the response's head read up to its blank line and parsed, its
body handed to httpx as it arrives (`llm/http11.py` holds the wire format). httpx above it is unchanged:
the client, request building, cookies, content decoding, errors, the proxies taken from the environment
(mounted on httpx's own transport), and the TLS context is httpx's.

The pool keeps httpx's defaults: at most `MAX_CONNECTIONS` connections in use at once (a request
beyond waits up to its pool timeout), `MAX_IDLE` kept alive per server, each reused within
`IDLE_SECONDS`, never one the server has closed (asyncio has read its end already), nor one whose
response was not read to its end or that either side asked to close.
"""

# ruff: noqa: ASYNC109  (the `timeout` parameters are httpx's per-phase timeouts, applied with asyncio.timeout)
from __future__ import annotations

import asyncio
import functools
import os
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx

from klaw.llm.http11 import MAX_HEAD_BYTES, UNTIL_CLOSE, ProtocolError, ResponseHead, chunk, read_body, read_head
from klaw.llm.http11 import request_head as head_of

# httpx's own defaults (httpx._config.DEFAULT_LIMITS, private there).
MAX_CONNECTIONS = 100
MAX_IDLE = 20
IDLE_SECONDS = 5.0
# A body up to this size goes out with its request's head in one write (one system call, one wake-up of
# the server); a larger one is written after it, so it is never copied whole.
SEND_BYTES = 256 * 1024

_Key = tuple[str, str, int]


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


class Connection:
    """One connection to a server, idle in the pool or carrying one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """Not closed by the server (asyncio has read its end into the reader), nor idle too long."""
        reader = self.reader
        return (
            now - self.idle_since <= IDLE_SECONDS
            and not reader.at_eof()
            and reader.exception() is None
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        self.writer.close()


class AsyncioBackend:
    """Opens connections as asyncio streams; `connections` counts those opened (for tests)."""

    def __init__(self) -> None:
        self.connections = 0

    async def connect(self, scheme: str, host: str, port: int, timeout: float | None) -> Connection:
        tls = tls_context() if scheme == "https" else None
        with _mapped(httpx.ConnectError, httpx.ConnectTimeout):
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None, limit=MAX_HEAD_BYTES
                )
        self.connections += 1
        return Connection(reader, writer)


class AsyncioTransport(httpx.AsyncBaseTransport):
    """A pool of HTTP/1.1 connections on `backend` (a new `AsyncioBackend` if none); see the module."""

    def __init__(self, backend: AsyncioBackend | None = None) -> None:
        tls_context()  # loaded now, not at the first request (decision 239)
        self._backend = backend or AsyncioBackend()
        self._idle: dict[_Key, list[Connection]] = {}
        self._in_use = asyncio.Semaphore(MAX_CONNECTIONS)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        if not url.host:
            raise httpx.UnsupportedProtocol("Request URL is missing a host.")
        timeouts = request.extensions.get("timeout", {})
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        await self._slot(timeouts.get("pool"))
        try:
            connection = self._reused(key) or await self._backend.connect(*key, timeouts.get("connect"))
            try:
                await _send(connection.writer, request, timeouts.get("write"))
                with _mapped(httpx.ReadError, httpx.ReadTimeout):
                    async with asyncio.timeout(timeouts.get("read")):
                        head = await read_head(connection.reader)
                    framing = head.framing(request.method.encode("ascii"))
            except BaseException:
                connection.close()
                raise
        except BaseException:
            self._in_use.release()
            raise
        body = _Body(self, key, connection, framing, _reusable(head, framing, request), timeouts.get("read"))
        extensions = {"http_version": head.version, "reason_phrase": head.reason}
        return httpx.Response(head.status, headers=head.headers, stream=body, extensions=extensions)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    async def _slot(self, timeout: float | None) -> None:
        if not self._in_use.locked():
            await self._in_use.acquire()
            return
        try:
            async with asyncio.timeout(timeout):
                await self._in_use.acquire()
        except TimeoutError as exc:
            raise httpx.PoolTimeout(f"no connection free within {timeout:g} s") from exc

    def _reused(self, key: _Key) -> Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now):
                return connection
            connection.close()
        return None

    def release(self, key: _Key, connection: Connection | None) -> None:
        """A response is done with: its connection back to the pool (None when it was closed instead)."""
        self._in_use.release()
        if connection is None:
            return
        idle = self._idle.setdefault(key, [])
        if len(idle) >= MAX_IDLE:
            idle.pop(0).close()
        connection.idle_since = time.monotonic()
        idle.append(connection)


class _Body(httpx.AsyncByteStream):
    """A response's body as it arrives; closing it gives its connection back, or closes it when the body
    was not read to its end or the connection cannot carry another request."""

    def __init__(
        self,
        pool: AsyncioTransport,
        key: _Key,
        connection: Connection,
        framing: int,
        reusable: bool,
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._key = key
        self._connection: Connection | None = connection
        self._framing = framing
        self._reusable = reusable
        self._timeout = timeout
        self._complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        pieces = read_body(connection.reader, self._framing)
        try:
            while True:
                with _mapped(httpx.ReadError, httpx.ReadTimeout):
                    try:
                        async with asyncio.timeout(self._timeout):
                            piece = await anext(pieces)
                    except StopAsyncIteration:
                        break
                yield piece
            self._complete = True
        finally:
            await pieces.aclose()

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if not (self._complete or self._framing == 0) or not self._reusable:
            connection.close()
            connection = None
        self._pool.release(self._key, connection)


async def _send(writer: asyncio.StreamWriter, request: httpx.Request, timeout: float | None) -> None:
    head = head_of(request)
    with _mapped(httpx.WriteError, httpx.WriteTimeout):
        try:
            body = request.content
        except httpx.RequestNotRead:  # a body of unknown length, chunked unless it said its length
            writer.write(head)
            sized = "content-length" in request.headers
            async for piece in request.stream:  # type: ignore[union-attr]
                writer.write(piece if sized else chunk(piece))
                async with asyncio.timeout(timeout):
                    await writer.drain()
            if not sized:
                writer.write(chunk(b""))
        else:
            if len(body) <= SEND_BYTES:
                writer.write(head + body)
            else:
                writer.write(head)
                writer.write(body)
        async with asyncio.timeout(timeout):
            await writer.drain()


def _reusable(head: ResponseHead, framing: int, request: httpx.Request) -> bool:
    """Whether the connection can carry another request once this response is read to its end."""
    if framing == UNTIL_CLOSE or not head.keeps_alive():
        return False
    return not any(key.lower() == b"connection" and b"close" in value.lower() for key, value in request.headers.raw)


@contextmanager
def _mapped(error: type[httpx.TransportError], timed_out: type[httpx.TimeoutException]) -> Iterator[None]:
    """OS and TLS failures, timeouts and a server's malformed answer as the httpx errors httpcore's were."""
    try:
        yield
    except TimeoutError as exc:
        raise timed_out(str(exc) or "timed out") from exc
    except ProtocolError as exc:
        raise httpx.RemoteProtocolError(str(exc)) from exc
    except EOFError as exc:
        raise error(str(exc) or "the server closed the connection") from exc
    except (OSError, ssl.SSLError) as exc:
        raise error(str(exc) or "the connection failed") from exc
