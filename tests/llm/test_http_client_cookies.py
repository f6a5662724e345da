"""The model client's httpx client (llm/http.py `new_http_client`): a cookie a server sets is sent back
(httpx reads the client's jar from `_cookies`, where klaw puts one that skips answers setting none), and a
base URL parsed once still reports a bad one in words on every call."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from klaw.config import ModelConfig
from klaw.llm.errors import LlmBadRequestError
from klaw.llm.http_client import CookiesWhenSet, new_http_client
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient


async def test_a_cookie_the_server_sets_is_sent_back_and_answers_without_one_leave_the_jar_alone() -> None:
    heads: list[bytes] = []
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(x[15:]) for x in head.lower().split(b"\r\n") if x.startswith(b"content-length"))
                await reader.readexactly(length)
                heads.append(head)
                cookie = b"Set-Cookie: session=abc; Path=/\r\n" if len(heads) == 1 else b""
                writer.write(b"HTTP/1.1 200 OK\r\n%scontent-length: %d\r\n\r\n%s" % (cookie, len(body), body))
                await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    config = ModelConfig(base_url=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", max_retries=0)
    http = new_http_client(config.base_url)
    client = OpenAiChatClient("local/model", config, http=http, env={})
    try:
        for text in ("one", "two", "three"):
            await client.complete([ChatMessage.user(text)])
    finally:
        await http.aclose()
        server.close()
    assert isinstance(http.cookies, CookiesWhenSet)
    assert dict(http.cookies) == {"session": "abc"}
    assert [b"cookie: session=abc" in head.lower() for head in heads] == [False, True, True]


@pytest.mark.parametrize("base_url", ["ftp://127.0.0.1/v1", "http://[::1/v1"])
async def test_a_bad_base_url_is_named_on_every_call(base_url: str) -> None:
    config = ModelConfig(base_url="http://127.0.0.1/v1", max_retries=0).model_copy(update={"base_url": base_url})
    client = OpenAiChatClient("local/model", config, env={})
    try:
        for _ in range(2):
            with pytest.raises(LlmBadRequestError, match=r"baseUrl is not a valid http\(s\) URL"):
                await client.complete([ChatMessage.user("hi")])
    finally:
        await client.aclose()
