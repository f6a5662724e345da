"""HTTP/1.1 as a model request needs it: a request's head in bytes, a response's head parsed, its body's
framing, and the body read by that framing from an asyncio stream.

This is what httpcore and h11 did for klaw's model client, without their general machinery: h11's state
machine, event objects and header validation by regular expression, httpcore's pool of connection
objects and locks cost ~1.5 ms of the event loop's CPU a request (decision 287), a tenth of a turn's.
The rules kept are RFC 9112's for a client: a response's body is delimited by `Transfer-Encoding:
chunked`, else by `Content-Length`, else by the connection's end (then never reused); a response to
HEAD, a 204 or a 304 has none; interim 1xx responses are skipped; a header value carrying a line break
is refused before anything is sent (a key in an environment variable with a newline must not inject a
header). Anything malformed from the server is a `ProtocolError`, which the transport reports as httpx's
`RemoteProtocolError`, as h11's errors were.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

import httpx

READ_BYTES = 64 * 1024  # a body is handed on in pieces of at most this size, as they arrive
MAX_HEAD_BYTES = 64 * 1024  # a response head past this is refused (h11's limit was 16 kB of headers)
UNTIL_CLOSE = -1  # a body delimited by the connection's end
CHUNKED = -2
_NO_BODY_STATUSES = frozenset({204, 304})


class ProtocolError(Exception):
    """The server's bytes are not HTTP/1.1 as a client can read them."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    version: bytes  # b"HTTP/1.1" or b"HTTP/1.0"

    def values(self, name: bytes) -> list[bytes]:
        """The values of header `name` (lowercase), each comma-separated element on its own, lowercased."""
        return [
            part.strip().lower()
            for key, value in self.headers
            if key.lower() == name
            for part in value.split(b",")
            if part.strip()
        ]

    def framing(self, method: bytes) -> int:
        """The body's length in bytes, `CHUNKED` or `UNTIL_CLOSE` (RFC 9112 6.3)."""
        if method == b"HEAD" or self.status in _NO_BODY_STATUSES or self.status < 200:
            return 0
        codings = self.values(b"transfer-encoding")
        if codings:
            return CHUNKED if codings[-1] == b"chunked" else UNTIL_CLOSE
        lengths = {value.strip() for key, value in self.headers if key.lower() == b"content-length"}
        if not lengths:
            return UNTIL_CLOSE
        if len(lengths) > 1:
            raise ProtocolError("the response gave conflicting Content-Length headers")
        (length,) = lengths
        if not length.isdigit():
            raise ProtocolError("the response's Content-Length is not a number")
        return int(length)

    def keeps_alive(self) -> bool:
        """Whether the server lets the connection carry another request once this body is read."""
        if self.version == b"HTTP/1.0":
            return False  # as h11 did: HTTP/1.0's keep-alive is an extension few servers still speak
        return b"close" not in self.values(b"connection")


def request_head(request: httpx.Request) -> bytes:
    """The request line and headers, as httpx built them (Host, Content-Length, … included)."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\0" in value:
            raise httpx.LocalProtocolError(f"the value of the header {name.decode('latin-1')!r} holds a line break")
        if not name or b"\r" in name or b"\n" in name or b":" in name or b" " in name:
            raise httpx.LocalProtocolError(f"{name.decode('latin-1')!r} is not a header name")
        lines.append(b"%s: %s" % (name, value))
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def parse_head(data: bytes) -> ResponseHead:
    """A response's status line and headers, `data` ending with the blank line."""
    lines = data[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not (len(parts[1]) == 3 and parts[1].isdigit()):
        raise ProtocolError("the server's answer does not begin with an HTTP/1.1 status line")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise ProtocolError("the server's answer holds a malformed header line")
        headers.append((name, value.strip(b" \t")))
    return ResponseHead(int(parts[1]), parts[2] if len(parts) > 2 else b"", headers, parts[0])


async def read_head(reader: asyncio.StreamReader) -> ResponseHead:
    """The next response head from `reader`; interim 1xx responses (but 101) are read past."""
    while True:
        try:
            data = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise ProtocolError("the server closed the connection partway through its answer's headers") from exc
            raise ProtocolError("the server disconnected without sending a response") from exc
        except asyncio.LimitOverrunError as exc:
            raise ProtocolError(f"the server's answer headers passed {MAX_HEAD_BYTES} bytes") from exc
        head = parse_head(data)
        if not 100 <= head.status < 200 or head.status == 101:
            return head


async def read_body(reader: asyncio.StreamReader, framing: int) -> AsyncGenerator[bytes, None]:
    """The body's bytes as they arrive, by `framing` (`ResponseHead.framing`)."""
    if framing == CHUNKED:
        async for piece in _chunked(reader):
            yield piece
    elif framing == UNTIL_CLOSE:
        while piece := await reader.read(READ_BYTES):
            yield piece
    else:
        async for piece in _exactly(reader, framing):
            yield piece


async def _exactly(reader: asyncio.StreamReader, length: int) -> AsyncIterator[bytes]:
    while length > 0:
        piece = await reader.read(min(length, READ_BYTES))
        if not piece:
            raise ProtocolError("the server closed the connection before its answer was complete")
        length -= len(piece)
        yield piece


async def _chunked(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size = _chunk_size(await _line(reader))
        if size == 0:
            while await _line(reader):  # trailers, up to the blank line
                pass
            return
        async for piece in _exactly(reader, size):
            yield piece
        if await _line(reader):
            raise ProtocolError("a chunk of the server's answer did not end where its size said")


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        return (await reader.readuntil(b"\r\n"))[:-2]
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("the server closed the connection before its answer was complete") from exc
    except asyncio.LimitOverrunError as exc:
        raise ProtocolError("a chunk size line of the server's answer is too long") from exc


def _chunk_size(line: bytes) -> int:
    digits = line.split(b";", 1)[0].strip()
    try:
        if not digits or digits.startswith((b"+", b"-", b"0x", b"0X")):
            raise ValueError
        return int(digits, 16)
    except ValueError:
        raise ProtocolError("a chunk size of the server's answer is not a hexadecimal number") from None


def chunk(piece: bytes) -> bytes:
    """One piece of a request body of unknown length in chunked transfer coding (b"" ends the body)."""
    return b"%x\r\n%s\r\n" % (len(piece), piece)
