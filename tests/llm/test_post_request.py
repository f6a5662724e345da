"""A model POST made by `post_request` is the request `AsyncClient.build_request` makes (decision 504)."""

from __future__ import annotations

import httpx
import pytest

from klaw.llm.endpoint import Endpoint
from klaw.llm.post_request import JSON_CONTENT, post_request, timeout_of

ENDPOINT = Endpoint("m", "http://127.0.0.1:8080/v1", "KEY", 30.0, 2, "models.m", connect_timeout_seconds=5.0)
BODY = '{"model":"m","messages":[{"role":"user","content":"été"}]}'.encode()
CALL = {"Accept-Encoding": "identity", "Authorization": "Bearer sk-1"}


def _built(http: httpx.AsyncClient, url: httpx.URL, call: dict[str, str]) -> httpx.Request:
    timeout = httpx.Timeout(30.0, connect=5.0)
    return http.build_request("POST", url, content=BODY, headers={**call, **JSON_CONTENT}, timeout=timeout)


@pytest.mark.parametrize(
    "client_headers",
    [None, {"User-Agent": "mine/1", "X-Extra": "yes"}, {"Accept-Encoding": "gzip"}],
)
async def test_the_same_header_lines_body_and_timeout(client_headers: dict[str, str] | None) -> None:
    async with httpx.AsyncClient(headers=client_headers) as http:
        for url in (httpx.URL("http://127.0.0.1:8080/v1/chat/completions"), httpx.URL("https://example.org/v1/x")):
            for call in (CALL, {"Accept-Encoding": "identity"}):
                made = post_request(http, url, call, timeout_of(ENDPOINT), {}, BODY)
                built = _built(http, url, call)
                assert made.headers.raw == built.headers.raw
                assert made.content == built.content == BODY
                assert made.extensions == built.extensions
                assert made.url == built.url and made.method == "POST"


async def test_a_client_holding_a_cookie_still_sends_it() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={}, headers={"Set-Cookie": "route=b; Path=/"} if len(seen) == 1 else {})

    url = httpx.URL("http://127.0.0.1:8080/v1/chat/completions")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        for _ in range(2):
            await http.send(post_request(http, url, CALL, timeout_of(ENDPOINT), {}, BODY))
    assert "cookie" not in seen[0].headers
    assert seen[1].headers["cookie"] == "route=b"
    assert seen[1].content == BODY
