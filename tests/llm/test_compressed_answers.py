"""A model server (or a proxy in front of it) that compresses its answer although klaw asked for it
uncompressed is read all the same, gzip or deflate, whole or streamed; a decompression bomb is cut at the
16 MB cap counted on the unpacked bytes, with the cap's words and bounded memory (decision 333).

The server is a real one on 127.0.0.1 writing raw HTTP/1.1, so the test controls every byte on the wire:
`Content-Encoding` stacked or unknown, deflate with or without its zlib header, an endless compressed body."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from klaw.config import ModelConfig
from klaw.llm.errors import LlmBadRequestError, LlmMalformedResponseError
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient

Serve = Callable[["Packer"], Awaitable[OpenAiChatClient]]
ANSWER = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello, unpacked"}, "finish_reason": "stop"}]
}
UNPACKED = 1024 * 1024  # what one repeated block of a bomb unpacks to
# The cap (16 MB) plus httpx's list of pieces and a few pieces of 64 KB; an unbounded unpacking of one
# read of the stacked bomb below is gigabytes.
MEMORY_BOUND = 40 * 1024 * 1024


@dataclass
class Packer:
    """A real HTTP server on 127.0.0.1 answering with `status`, `encoding` and `body`, then `later` (each
    written a moment after the one before, so the client reads it apart), then `block` repeated while the
    client reads (an endless compressed body when set). `sent` counts the bytes on the wire."""

    encoding: str
    body: bytes = b""
    block: bytes = b""
    status: str = "200 OK"
    content_type: str = "application/json"
    later: tuple[bytes, ...] = ()
    sent: int = 0
    requests: list[bytes] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(request)
        length = next(
            (
                int(line.split(b":")[1])
                for line in request.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        head = f"HTTP/1.1 {self.status}\r\ncontent-type: {self.content_type}\r\ncontent-encoding: {self.encoding}\r\n"
        writer.write(f"{head}connection: close\r\n\r\n".encode() + self.body)
        self.sent += len(self.body)
        try:
            for piece in self.later:
                await writer.drain()
                await asyncio.sleep(0.2)  # the piece before is read on its own
                writer.write(piece)
            while self.block and self.sent < 256 * 1024 * 1024:
                writer.write(self.block)
                await writer.drain()
                self.sent += len(self.block)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a `Packer` and return a client of it (no retries: one request per test)."""
    servers: list[asyncio.Server] = []
    clients: list[OpenAiChatClient] = []

    async def opened(packer: Packer) -> OpenAiChatClient:
        server = await asyncio.start_server(packer.serve, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        config = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout_seconds=10)
        clients.append(OpenAiChatClient("packed/model", config))
        return clients[-1]

    yield opened
    for client in clients:
        await client.aclose()
    for server in servers:
        server.close()


async def ask(client: OpenAiChatClient, *, stream: bool) -> None:
    if stream:
        _ = [delta async for delta in client.stream([ChatMessage.user("hi")])]
    else:
        await client.complete([ChatMessage.user("hi")])


def deflated(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


def bomb_blocks(wbits: int, first: bytes, then: bytes) -> tuple[bytes, bytes]:
    """The start of an endless compressed stream (`first` packed, after its header) and the block that goes
    on repeating it (`then` packed): after a full flush zlib forgets what came before, so the same input
    compresses to the same bytes each time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    start = packer.compress(first) + packer.flush(zlib.Z_FULL_FLUSH)
    return start, packer.compress(then) + packer.flush(zlib.Z_FULL_FLUSH)


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", lambda data: deflated(data, zlib.MAX_WBITS)),
        ("deflate", lambda data: deflated(data, -zlib.MAX_WBITS)),  # raw deflate, as some servers send it
        ("gzip, gzip", lambda data: gzip.compress(gzip.compress(data))),
        ("identity", lambda data: data),
    ],
)
async def test_a_compressed_answer_is_read(serve: Serve, encoding: str, pack: Callable[[bytes], bytes]) -> None:
    packer = Packer(encoding, body=pack(json.dumps(ANSWER).encode()))
    client = await serve(packer)

    answer = await client.complete([ChatMessage.user("hi")])

    assert answer.content == "hello, unpacked"
    assert b"accept-encoding: identity" in packer.requests[0].lower()  # still asked for uncompressed


async def test_a_compressed_stream_is_read_as_it_comes(
    serve: Serve,
) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    body = b""
    for word in ("hello", ", ", "streamed"):
        chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
        body += packer.compress(f"data: {json.dumps(chunk)}\n\n".encode()) + packer.flush(zlib.Z_SYNC_FLUSH)
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body += packer.compress(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode()) + packer.flush()
    client = await serve(Packer("gzip", body=body, content_type="text/event-stream"))

    words = [delta.content async for delta in client.stream([ChatMessage.user("hi")]) if delta.content]

    assert "".join(words) == "hello, streamed"


@pytest.mark.parametrize(
    ("encoding", "stream"),
    [("gzip", False), ("deflate", False), ("gzip", True), ("gzip, gzip", False)],
)
async def test_a_decompression_bomb_is_cut_at_16_mb_unpacked(serve: Serve, encoding: str, stream: bool) -> None:
    """An endless body unpacking ~1,000 times (a million times stacked): refused with the cap's words after
    16 MB unpacked, a few kilobytes to a few megabytes on the wire, and never more than the cap in memory."""
    wbits = zlib.MAX_WBITS | 16 if encoding.startswith("gzip") else zlib.MAX_WBITS
    start, block = bomb_blocks(
        wbits, b" " * UNPACKED, b" " * UNPACKED
    )  # JSON's whitespace, or one endless line of a stream
    if encoding == "gzip, gzip":  # the endless inner stream, itself compressed: 1 GB unpacked per ~1 KB read
        start, block = bomb_blocks(wbits, start + block * 63, block * 64)
    packer = Packer(
        encoding, body=start, block=block, content_type="text/event-stream" if stream else "application/json"
    )
    client = await serve(packer)

    tracemalloc.start()
    try:
        with pytest.raises(LlmMalformedResponseError) as caught:
            await ask(client, stream=stream)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    what = "one line of its stream" if stream else "its answer"
    assert f"{what} passed 16 MB without ending; klaw stopped reading it (model 'packed/model'" in str(caught.value)
    assert "counted unpacked if it came compressed" in str(caught.value)
    assert peak < MEMORY_BOUND
    assert packer.sent < 16 * 1024 * 1024  # the server wrote far less than it would unpack to


@pytest.mark.parametrize(
    ("encoding", "words"),
    [
        ("br", "it sent its answer in a compression klaw cannot undo (br)"),
        ("zstd, gzip", "it sent its answer in a compression klaw cannot undo (zstd)"),
        ("gzip, gzip, gzip", "it sent its answer compressed 3 times over"),
    ],
)
async def test_a_compression_klaw_does_not_undo_is_named(serve: Serve, encoding: str, words: str) -> None:
    client = await serve(Packer(encoding, body=b"\x00" * 100))

    with pytest.raises(LlmMalformedResponseError) as caught:
        await client.complete([ChatMessage.user("hi")])

    assert words in str(caught.value)
    assert "undoes gzip and deflate only" in str(caught.value)


async def test_corrupt_compressed_data_is_a_worded_refusal(
    serve: Serve,
) -> None:
    client = await serve(Packer("gzip", body=gzip.compress(json.dumps(ANSWER).encode())[:12] + b"\xff" * 64))

    with pytest.raises(LlmMalformedResponseError) as caught:
        await client.complete([ChatMessage.user("hi")])

    assert "its gzip data is corrupt" in str(caught.value)


async def test_a_compressed_error_body_still_names_the_problem(
    serve: Serve,
) -> None:
    said = {"error": {"message": "model 'packed/model' is not loaded on this server"}}
    client = await serve(Packer("gzip", status="400 Bad Request", body=gzip.compress(json.dumps(said).encode())))

    with pytest.raises(LlmBadRequestError) as caught:
        await client.complete([ChatMessage.user("hi")])

    assert "HTTP 400: model 'packed/model' is not loaded on this server" in str(caught.value)


async def test_what_follows_the_compressed_answer_is_not_read(serve: Serve) -> None:
    """httpx read on past the end of a gzip stream and threw the rest away: endless junk there was never
    counted and held the call to its deadline."""
    packer = Packer("gzip", body=gzip.compress(json.dumps(ANSWER).encode()), block=b"junk" * 65536)
    client = await serve(packer)

    answer = await client.complete([ChatMessage.user("hi")])

    assert answer.content == "hello, unpacked"
    assert packer.sent < 16 * 1024 * 1024


@pytest.mark.parametrize("wbits", [-zlib.MAX_WBITS, zlib.MAX_WBITS])
async def test_deflate_whose_first_piece_is_one_byte_is_read(serve: Serve, wbits: int) -> None:
    """Raw deflate was told from zlib-wrapped on the first piece read, whatever its size: one byte holds half
    of a zlib header, so raw deflate arriving a byte first was called corrupt (httpx has the same flaw)."""
    packed = deflated(json.dumps(ANSWER).encode(), wbits)
    client = await serve(Packer("deflate", body=packed[:1], later=(packed[1:],)))

    answer = await client.complete([ChatMessage.user("hi")])

    assert answer.content == "hello, unpacked"


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [("gzip", gzip.compress), ("deflate", lambda data: deflated(data, zlib.MAX_WBITS))],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_compressed_answer_cut_off_midway_is_called_cut_off(
    serve: Serve, encoding: str, pack: Callable[[bytes], bytes], stream: bool
) -> None:
    """The connection closed halfway through the compressed data: what had come was passed on as the whole
    answer, then refused as "not valid JSON" (or a stream ended without its end)."""
    if stream:
        chunk = {"choices": [{"index": 0, "delta": {"content": "x" * 4000}}]}
        packed = pack(f"data: {json.dumps(chunk)}\n\n".encode() * 20 + b"data: [DONE]\n\n")
    else:
        packed = pack(json.dumps(ANSWER).encode())
    content_type = "text/event-stream" if stream else "application/json"
    client = await serve(Packer(encoding, body=packed[: len(packed) // 2], content_type=content_type))

    with pytest.raises(LlmMalformedResponseError) as caught:
        await ask(client, stream=stream)

    said = str(caught.value)
    assert f"it sent its answer cut off midway: the stream ended before its {encoding} data did" in said, said
    assert "not valid JSON" not in said


async def test_an_answer_in_several_gzip_members_is_read_whole_and_endless_members_end(serve: Serve) -> None:
    """RFC 1952 lets a gzip body be several members one after another: all but the first were dropped and
    the rest presented as whole (adversary13). Members are read up to a bound: an endless stream of empty
    ones (nothing unpacked, so no cap counts them) ends in words."""
    text = json.dumps(ANSWER).encode()
    client = await serve(Packer("gzip", body=gzip.compress(text[:30]) + gzip.compress(text[30:])))
    assert (await client.complete([ChatMessage.user("hi")])).content == "hello, unpacked"

    endless = Packer("gzip", body=gzip.compress(text[:30]), block=gzip.compress(b"") * 1000)
    with pytest.raises(LlmMalformedResponseError) as caught:
        await (await serve(endless)).complete([ChatMessage.user("hi")])
    assert "its gzip data holds more than 1000 members" in str(caught.value)
