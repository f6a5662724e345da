"""A model server answering without end, or with answers no model writes, gets a worded refusal after a bounded
read (decision 317): a whole body or one line of a stream past 16 MB, an error status's body past its excerpt,
an endless stream of empty chunks, JSON nested too deep, a tool call's id of megabytes
(a compressed answer: test_compressed_answers.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from klaw.config import ModelConfig
from klaw.llm import openai_client
from klaw.llm.errors import LlmMalformedResponseError, LlmServerError
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient
from tests.llm.conftest import ClientFactory

FLOOD_BYTES = 64 * 1024 * 1024  # four times the cap; an old klaw read it all, then waited for more
BLOCK = 256 * 1024
# The cap (16 MB) plus what the sockets' buffers hold on the way, far under FLOOD_BYTES.
BOUND = 32 * 1024 * 1024


@dataclass
class Flooder:
    """A real HTTP server on 127.0.0.1 answering every request with `status`, `content_type` and a body of
    `head` then `block` repeated up to FLOOD_BYTES, then nothing more while the connection stays open.
    `sent` counts the bytes handed to the connection before the client hung up."""

    status: str = "200 OK"
    content_type: str = "application/json"
    head: bytes = b""
    block: bytes = b"A" * BLOCK
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
        writer.write(
            f"HTTP/1.1 {self.status}\r\ncontent-type: {self.content_type}\r\nconnection: close\r\n\r\n".encode()
        )
        writer.write(self.head)
        try:
            while self.sent < FLOOD_BYTES:
                writer.write(self.block)
                await writer.drain()
                self.sent += len(self.block)
            await reader.read()  # until the client hangs up
        except ConnectionError:
            pass
        finally:
            writer.close()


async def ask(client: OpenAiChatClient, *, stream: bool, deltas: list[object] | None = None) -> None:
    """One question, its answer streamed (each delta kept in `deltas`) or whole."""
    if not stream:
        await client.complete([ChatMessage.user("hi")])
        return
    async for delta in client.stream([ChatMessage.user("hi")]):
        (deltas if deltas is not None else []).append(delta)


@pytest.fixture
async def flooder() -> AsyncIterator[tuple[Flooder, OpenAiChatClient]]:
    flood = Flooder()
    server = await asyncio.start_server(flood.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout_seconds=5)
    client = OpenAiChatClient("flood/model", config)
    async with server:
        yield flood, client
        await client.aclose()


async def test_an_endless_answer_is_refused_after_16_mb(flooder: tuple[Flooder, OpenAiChatClient]) -> None:
    flood, client = flooder

    with pytest.raises(LlmMalformedResponseError) as caught:
        await client.complete([ChatMessage.user("hi")])

    assert "its answer passed 16 MB without ending; klaw stopped reading it (model 'flood/model'" in str(caught.value)
    assert "at most 16 MB" in str(caught.value)
    assert flood.sent < BOUND
    assert b"accept-encoding: identity" in flood.requests[0].lower()


async def test_one_endless_line_of_a_stream_is_refused_after_16_mb(
    flooder: tuple[Flooder, OpenAiChatClient],
) -> None:
    flood, client = flooder
    flood.content_type, flood.head = "text/event-stream", b'data: {"choices": [{"delta": {"content": "'

    with pytest.raises(LlmMalformedResponseError) as caught:
        await ask(client, stream=True)

    assert "one line of its stream passed 16 MB without ending" in str(caught.value)
    assert flood.sent < BOUND


async def test_an_endless_error_body_is_read_only_for_its_excerpt(flooder: tuple[Flooder, OpenAiChatClient]) -> None:
    flood, client = flooder
    flood.status = "500 Internal Server Error"

    with pytest.raises(LlmServerError) as caught:
        await client.complete([ChatMessage.user("hi")])

    assert "the server failed (HTTP 500) on all 1 attempt(s)" in str(caught.value)
    assert flood.sent < BOUND


@pytest.mark.parametrize(
    "delta",
    [{"content": ""}, {}, {"role": "assistant"}, {"content": None}, None],
    ids=["empty-content", "empty-delta", "role-alone", "null-content", "no-choices"],
)
async def test_an_endless_stream_of_empty_chunks_ends_after_20_000(
    flooder: tuple[Flooder, OpenAiChatClient], delta: dict[str, object] | None
) -> None:
    """A chunk carrying nothing weighs 100 characters toward the answer's 2,000,000 (decision 334): the stream
    ends after 20,000 of them. It ran to 2,000,000 (minutes of CPU), here past the server's 64 MB (~1 million
    chunks) into the call's timeout."""
    flood, client = flooder
    chunk = {"choices": [] if delta is None else [{"index": 0, "delta": delta}]}
    event = f"data: {json.dumps(chunk)}\n\n".encode()
    flood.content_type, flood.block = "text/event-stream", event * (BLOCK // len(event))

    deltas: list[object] = []
    with pytest.raises(LlmMalformedResponseError) as caught:
        await ask(client, stream=True, deltas=deltas)

    assert (
        "the model's answer passed 2,000,000 characters without ending (a chunk of its stream carrying nothing"
        " counts as 100); klaw stopped reading it"
    ) in str(caught.value)
    assert len(deltas) == 20_000


async def test_chunks_carrying_text_still_count_one_character_each(
    flooder: tuple[Flooder, OpenAiChatClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit lowered so the test is short: one-character chunks count one each, as before."""
    monkeypatch.setattr(openai_client, "MAX_ANSWER_CHARS", 10_000)
    flood, client = flooder
    event = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
    flood.content_type, flood.block = "text/event-stream", event * (BLOCK // len(event))

    deltas: list[object] = []
    with pytest.raises(LlmMalformedResponseError) as caught:
        await ask(client, stream=True, deltas=deltas)

    assert "the model's answer passed 10,000 characters without ending" in str(caught.value)
    assert len(deltas) == 10_000


@pytest.mark.parametrize("stream", [False, True])
async def test_json_nested_too_deep_is_a_worded_refusal(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, stream: bool
) -> None:
    nested = "[" * 200_000 + "]" * 200_000
    if stream:
        openai_server.reply_raw(f"data: {nested}\n\n", content_type="text/event-stream")
    else:
        openai_server.reply_raw(nested)
    client = make_client()

    with pytest.raises(LlmMalformedResponseError) as caught:
        await ask(client, stream=stream)

    what = "a stream chunk" if stream else "the response"
    assert f"{what} was JSON nested too deep to read (400,000 bytes)" in str(caught.value)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_call_id_of_megabytes_is_refused(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, stream: bool
) -> None:
    """An id is stored and sent back with every later request, outside the answer's counted length."""
    call = {"id": "c" * 5_000_000, "type": "function", "function": {"name": "t", "arguments": "{}"}}
    if stream:
        delta = {"tool_calls": [{"index": 0, **call}]}
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": "tool_calls"}]}
        openai_server.reply_raw(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n", content_type="text/event-stream")
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        openai_server.reply_raw(
            json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})
        )
    client = make_client()

    with pytest.raises(LlmMalformedResponseError) as caught:
        await ask(client, stream=stream)

    assert "tool_call.id is 5,000,000 characters long (a tool call id: at most 1,000)" in str(caught.value)
