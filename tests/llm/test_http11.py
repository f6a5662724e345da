"""The model client's own HTTP/1.1 (llm/http11.py under llm/asyncio_transport.py), through the chat client
against a server that answers with scripted bytes: each way a body can be delimited, interim answers,
which connections are reused and which are not, answers cut short or malformed, and a header that would
break the request."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest

from klaw.config import ModelConfig
from klaw.llm.asyncio_transport import AsyncioBackend, AsyncioTransport
from klaw.llm.errors import LlmAuthError, LlmConnectionError
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient


def _answer(text: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()


def _sized(text: str, extra: bytes = b"") -> bytes:
    body = _answer(text)
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n"
        % (
            len(body),
            extra,
        )
        + body
    )


@dataclass
class Scripted:
    """Answers each request with the next scripted bytes, then closes the connection if asked to."""

    answers: list[tuple[bytes, bool]] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.lower().split(b"\r\n")
                length = next(int(line[15:]) for line in lines if line.startswith(b"content-length"))
                await reader.readexactly(length)
                self.heads.append(head)
                answer, close = self.answers.pop(0)
                writer.write(answer)
                await writer.drain()
                if close:
                    break
        writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[Scripted]:
    script = Scripted()
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    script.base_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        yield script
    finally:
        server.close()


@contextlib.asynccontextmanager
async def _client(base_url: str, **env: str) -> AsyncIterator[tuple[OpenAiChatClient, AsyncioBackend]]:
    backend = AsyncioBackend()
    http = httpx.AsyncClient(timeout=None, follow_redirects=False, transport=AsyncioTransport(backend))
    config = ModelConfig(base_url=base_url, max_retries=0, timeout_seconds=10, api_key_env="KEY" if env else None)
    try:
        yield OpenAiChatClient("local/model", config, http=http, env=env), backend
    finally:
        await http.aclose()


async def _ask(client: OpenAiChatClient, text: str = "hi") -> str | None:
    return (await client.complete([ChatMessage.user(text)])).content


async def test_chunked_answers_with_extensions_and_trailers_keep_their_connection(scripted: Scripted) -> None:
    body = _answer("in chunks")
    pieces = b"".join(b"%x;name=value\r\n%s\r\n" % (len(p), p) for p in (body[:7], body[7:20], body[20:]))
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + pieces + b"0\r\nX-Trailer: yes\r\n\r\n"
    scripted.answers += [(answer, False), (_sized("again"), False)]
    async with _client(scripted.base_url) as (client, backend):
        assert [await _ask(client), await _ask(client)] == ["in chunks", "again"]
    assert backend.connections == 1


async def test_an_answer_without_length_is_read_to_the_close_and_its_connection_not_reused(scripted: Scripted) -> None:
    scripted.answers += [(b"HTTP/1.1 200 OK\r\n\r\n" + _answer("to the end"), True), (_sized("new"), False)]
    async with _client(scripted.base_url) as (client, backend):
        assert [await _ask(client), await _ask(client)] == ["to the end", "new"]
    assert backend.connections == 2


async def test_interim_answers_are_read_past_and_a_close_asked_for_is_honoured(scripted: Scripted) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
    scripted.answers += [(interim + _sized("after", b"Connection: close\r\n"), True), (_sized("next"), False)]
    async with _client(scripted.base_url) as (client, backend):
        assert [await _ask(client), await _ask(client)] == ["after", "next"]
    assert backend.connections == 2


async def test_an_http_1_0_answers_connection_is_not_reused_even_when_it_says_keep_alive(scripted: Scripted) -> None:
    body = _answer("old")
    old = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    kept = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    scripted.answers += [(old, True), (kept, True), (_sized("third"), False)]
    async with _client(scripted.base_url) as (client, backend):
        assert [await _ask(client) for _ in range(3)] == ["old", "old", "third"]
    assert backend.connections == 3


async def test_an_answer_cut_short_says_so_and_its_connection_is_dropped(scripted: Scripted) -> None:
    cut = b"HTTP/1.1 200 OK\r\ncontent-length: 500\r\n\r\n" + _answer("partial")
    scripted.answers += [(cut, True)]
    async with _client(scripted.base_url) as (client, _):
        with pytest.raises(LlmConnectionError, match="the answer broke off: the server closed the connection before"):
            await _ask(client)


@pytest.mark.parametrize(
    "answer",
    [b"NOT HTTP\r\n\r\n", b"HTTP/1.1 2000 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\n folded: header\r\n\r\n", b""],
)
async def test_a_malformed_or_missing_answer_is_named(scripted: Scripted, answer: bytes) -> None:
    scripted.answers += [(answer, True)]
    async with _client(scripted.base_url) as (client, _):
        with pytest.raises(LlmConnectionError, match="the server closed the connection without an answer"):
            await _ask(client)


async def test_conflicting_lengths_are_refused(scripted: Scripted) -> None:
    body = _answer("x")
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\ncontent-length: 3\r\n\r\n" % len(body)
    scripted.answers += [(head + body, True)]
    async with _client(scripted.base_url) as (client, _):
        with pytest.raises(LlmConnectionError, match="without an answer"):
            await _ask(client)


async def test_a_stream_left_early_does_not_leave_its_connection_for_the_next_request(
    openai_server: FakeOpenAiServer,
) -> None:
    openai_server.reply_text("one two three four five six")
    openai_server.reply_text("whole")
    async with _client(openai_server.base_url) as (client, backend):
        async with contextlib.aclosing(client.stream([ChatMessage.user("go")])) as deltas:
            async for _ in deltas:
                break
        assert await _ask(client) == "whole"
    assert backend.connections == 2  # the first's unread rest would have been read as the second's answer


async def test_an_api_key_with_a_line_break_is_refused_without_being_shown(scripted: Scripted) -> None:
    scripted.answers += [(_sized("never"), False)]
    async with _client(scripted.base_url, KEY="sk-secret-1\r\nX-Injected: 1") as (client, backend):
        with pytest.raises(LlmAuthError, match=r"the environment variable KEY, .* holds a line break") as raised:
            await _ask(client)
    assert "sk-secret" not in str(raised.value) and "sk-secret" not in repr(raised.value.__cause__)
    assert backend.connections == 0 and scripted.heads == []


async def test_a_header_value_with_a_line_break_is_never_sent(scripted: Scripted) -> None:
    scripted.answers += [(_sized("never"), False)]
    backend = AsyncioBackend()
    async with httpx.AsyncClient(transport=AsyncioTransport(backend)) as http:
        with pytest.raises(httpx.LocalProtocolError, match="'X-Note' holds a line break"):
            await http.post(scripted.base_url, content=b"{}", headers={"X-Note": "a\r\nX-Injected: 1"})
    assert scripted.heads == []


async def test_a_body_of_unknown_length_goes_chunked(scripted: Scripted) -> None:
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        seen.append(await reader.readuntil(b"0\r\n\r\n"))
        writer.write(_sized("got it"))
        await writer.drain()
        writer.close()

    async def pieces() -> AsyncIterator[bytes]:
        yield b'{"a":'
        yield b"1}"

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            response = await http.post(f"http://127.0.0.1:{port}/", content=pieces())
    finally:
        server.close()
    assert response.json()["choices"][0]["message"]["content"] == "got it"
    assert b"transfer-encoding: chunked" in seen[0].lower()
    assert seen[1] == b'5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n'
