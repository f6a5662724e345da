"""FakeOpenAiServer speaks the OpenAI wire format over real HTTP (checked with plain httpx)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from klaw.llm.fake_server import FakeOpenAiServer, TextReply, fake_embedding


async def _post(server: FakeOpenAiServer, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"{server.base_url}/{path}", json=body, headers={"Authorization": "Bearer k"})


def _events(response: httpx.Response) -> list[str]:
    return [line[len("data: ") :] for line in response.text.split("\n\n") if line.startswith("data: ")]


CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hello"}]}


async def test_chat_completion_shape(openai_server: FakeOpenAiServer) -> None:
    openai_server.reply_text("hi there")

    response = await _post(openai_server, "chat/completions", CHAT)

    body = response.json()
    assert response.status_code == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "fake-model"
    assert isinstance(body["id"], str)
    assert isinstance(body["created"], int)
    assert body["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "hi there"}, "finish_reason": "stop"}
    ]
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


async def test_requests_are_recorded(openai_server: FakeOpenAiServer) -> None:
    await _post(openai_server, "chat/completions", CHAT)

    (recorded,) = openai_server.requests
    assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
    assert recorded.body == CHAT
    assert recorded.headers["authorization"] == "Bearer k"
    assert openai_server.chat_requests == [recorded]


async def test_tool_call_stream_shape(openai_server: FakeOpenAiServer) -> None:
    openai_server.reply_tool_calls([("get_time", {"tz": "UTC"})])

    response = await _post(openai_server, "chat/completions", {**CHAT, "stream": True})

    events = _events(response)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["function"]["name"] == "get_time"
    assert all(set(c) == {"index", "function"} for c in calls[1:])
    assert "".join(c["function"]["arguments"] for c in calls) == '{"tz": "UTC"}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert "usage" not in chunks[-1]  # only sent when stream_options.include_usage asks for it


async def test_error_body_and_retry_after(openai_server: FakeOpenAiServer) -> None:
    openai_server.reply_error(429, retry_after=1.5)

    response = await _post(openai_server, "chat/completions", CHAT)

    assert response.status_code == 429
    assert response.headers["retry-after"] == "1.5"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"}
    assert error["code"] == "rate_limit_exceeded"


async def test_malformed_reply_is_not_json(openai_server: FakeOpenAiServer) -> None:
    openai_server.reply_malformed()

    response = await _post(openai_server, "chat/completions", CHAT)

    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()


@pytest.mark.parametrize("stream", [False, True])
async def test_raw_reply_is_sent_verbatim(openai_server: FakeOpenAiServer, stream: bool) -> None:
    sse = b': OPENROUTER PROCESSING\n\ndata: {"error": {"message": "cut"}}\n\n'
    openai_server.reply_raw(sse, content_type="text/event-stream", status=202)
    openai_server.reply_raw('{"error": "in a 200"}')

    first = await _post(openai_server, "chat/completions", {**CHAT, "stream": stream})
    second = await _post(openai_server, "chat/completions", {**CHAT, "stream": stream})

    assert (first.status_code, first.content) == (202, sse)
    assert first.headers["content-type"].startswith("text/event-stream")
    assert (second.status_code, second.content) == (200, b'{"error": "in a 200"}')
    assert second.headers["content-type"] == "application/json"


async def test_raw_reply_on_the_embeddings_endpoint(openai_server: FakeOpenAiServer) -> None:
    openai_server.reply_raw(b"<html>Bad Gateway</html>", content_type="text/html", status=502, endpoint="embeddings")

    response = await _post(openai_server, "embeddings", {"model": "e", "input": ["x"]})

    assert (response.status_code, response.text) == (502, "<html>Bad Gateway</html>")
    assert response.headers["content-type"].startswith("text/html")


async def test_unknown_model_is_404_when_models_are_known() -> None:
    async with FakeOpenAiServer(known_models=["llama3.2"]) as server:
        response = await _post(server, "chat/completions", CHAT)
        async with httpx.AsyncClient() as http:
            listed = await http.get(f"{server.base_url}/models")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"
    assert [m["id"] for m in listed.json()["data"]] == ["llama3.2"]


async def test_unknown_embedding_model_is_404_when_models_are_known() -> None:
    async with FakeOpenAiServer(known_models=["nomic-embed-text"]) as server:
        unknown = await _post(server, "embeddings", {"model": "nomic-embed-txt", "input": ["a"]})
        known = await _post(server, "embeddings", {"model": "nomic-embed-text", "input": ["a"]})

    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    assert "nomic-embed-txt" in unknown.json()["error"]["message"]
    assert known.status_code == 200


async def test_embeddings_are_deterministic_and_indexed(openai_server: FakeOpenAiServer) -> None:
    openai_server.embedding_dim = 8

    response = await _post(openai_server, "embeddings", {"model": "e", "input": ["a", "b"]})

    data = response.json()["data"]
    assert [d["index"] for d in data] == [0, 1]
    assert all(d["object"] == "embedding" and len(d["embedding"]) == 8 for d in data)
    assert data[0]["embedding"] == fake_embedding("a", 8)
    assert data[0]["embedding"] != data[1]["embedding"]


async def test_before_hook_holds_a_reply_until_released(openai_server: FakeOpenAiServer) -> None:
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        arrived.set()
        await release.wait()

    openai_server.reply_text("held", before=hold)

    pending = asyncio.create_task(_post(openai_server, "chat/completions", CHAT))
    await arrived.wait()
    assert not pending.done()
    release.set()

    assert (await pending).json()["choices"][0]["message"]["content"] == "held"


async def test_reply_embeddings_holds_one_request_then_answers_its_vectors(openai_server: FakeOpenAiServer) -> None:
    openai_server.embedding_dim = 8
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        arrived.set()
        await release.wait()

    openai_server.reply_embeddings(before=hold)

    held = asyncio.create_task(_post(openai_server, "embeddings", {"model": "e", "input": ["held"]}))
    async with asyncio.timeout(10):  # a guard against a hanging test, not a timing assumption
        await arrived.wait()
        after = await _post(openai_server, "embeddings", {"model": "e", "input": ["next"]})
        assert not held.done()  # only the scripted request waits; the next one is answered meanwhile
        release.set()
        response = await held

    assert after.json()["data"][0]["embedding"] == fake_embedding("next", 8)
    assert response.status_code == 200
    assert response.json()["data"] == [{"object": "embedding", "index": 0, "embedding": fake_embedding("held", 8)}]


async def test_custom_default_reply() -> None:
    async with FakeOpenAiServer(default_reply=lambda body: TextReply(f"{len(body['messages'])} messages")) as server:
        response = await _post(server, "chat/completions", CHAT)

    assert response.json()["choices"][0]["message"]["content"] == "1 messages"


async def test_a_hung_reply_does_not_block_shutdown() -> None:
    arrived = asyncio.Event()

    async def note_arrival() -> None:
        arrived.set()

    async with asyncio.timeout(10):  # a guard against a hanging test, not a timing assumption
        async with FakeOpenAiServer(latency=note_arrival) as server:
            server.reply_hang()
            pending = asyncio.create_task(_post(server, "chat/completions", CHAT))
            await arrived.wait()
        outcome = await asyncio.gather(pending, return_exceptions=True)

    result = outcome[0]
    assert isinstance(result, httpx.HTTPError) or (isinstance(result, httpx.Response) and result.status_code == 503)


async def test_base_url_needs_a_running_server() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = FakeOpenAiServer().base_url
