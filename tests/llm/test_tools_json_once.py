"""A chat client encodes the tools it offers once while they stay the same (decision 336): the bytes a real
server receives are the ones httpx's `json=` would have sent, and a changed tool reaches it at once."""

from __future__ import annotations

import json

import httpx
import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage, ToolSpec
from klaw.llm.protocol import collect
from tests.llm.conftest import ClientFactory

CLOCK = ToolSpec("get_time", "Current time in a zone", {"type": "object", "properties": {"tz": {"type": "string"}}})
NOTE = ToolSpec("note", "Keep a note «verbatim»", {"type": "object", "properties": {"text": {"type": "string"}}})


def _wire(*tools: ToolSpec) -> list[dict[str, object]]:
    functions = [{"name": t.name, "description": t.description, "parameters": dict(t.parameters)} for t in tools]
    return [{"type": "function", "function": function} for function in functions]


async def test_the_same_tools_are_encoded_once_and_every_request_carries_them(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[str] = []
    to_wire = ToolSpec.to_wire

    def counting(self: ToolSpec) -> dict[str, object]:
        encoded.append(self.name)
        return to_wire(self)

    monkeypatch.setattr(ToolSpec, "to_wire", counting)
    client = make_client()
    await client.complete([ChatMessage.user("time?")], [CLOCK, NOTE], temperature=0.5)
    await client.complete([ChatMessage.user("and now?")], [CLOCK, NOTE])
    await collect(client.stream([ChatMessage.user("once more")], [CLOCK, NOTE]))

    requests = openai_server.chat_requests
    assert [request.body["tools"] for request in requests] == [_wire(CLOCK, NOTE)] * 3
    assert [request.body["messages"][-1]["content"] for request in requests] == ["time?", "and now?", "once more"]
    assert requests[0].body["temperature"] == 0.5 and requests[2].body["stream"] is True
    assert all(request.headers["content-type"] == "application/json" for request in requests)
    assert encoded == ["get_time", "note"]  # once for the three calls (the old code: at every call)


async def test_a_changed_tool_set_is_sent_as_it_now_is(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    client = make_client()
    await client.complete([ChatMessage.user("a")], [CLOCK, NOTE])
    renamed = ToolSpec("get_time", "Current time anywhere", CLOCK.parameters)
    await client.complete([ChatMessage.user("b")], [renamed, NOTE])
    await client.complete([ChatMessage.user("c")], [NOTE])
    await client.complete([ChatMessage.user("d")])

    sent = [request.body.get("tools") for request in openai_server.chat_requests]
    assert sent == [_wire(CLOCK, NOTE), _wire(renamed, NOTE), _wire(NOTE), None]


@pytest.mark.parametrize("tools", [(), (CLOCK,), (CLOCK, NOTE)])
def test_the_body_is_the_bytes_httpx_json_would_send(tools: tuple[ToolSpec, ...]) -> None:
    from klaw.llm.wire_body import ToolsJson, request_body  # here: the other tests run on the old code too

    payload: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": "été ✓ \u2028"}]}
    if tools:
        payload["tools"] = _wire(*tools)
    payload |= {"temperature": 0.2, "stream": True, "stream_options": {"include_usage": True}}
    expected = httpx.Request("POST", "http://x/", json=payload).content

    placed = {key: (None if key == "tools" else value) for key, value in payload.items()}
    assert request_body(placed, ToolsJson().of(tools) if tools else None) == expected
    assert json.loads(expected) == payload
