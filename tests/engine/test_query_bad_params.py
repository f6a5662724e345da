"""Every socket query answers bad parameters under the query's own id (decision 532, adversary32: a
`running_tool` query with `params: []` looked unanswered). Over a running engine's socket: each query the
engine knows (its own "unknown query" answer lists them) is asked with parameters of every wrong shape,
and each is answered by a `result` with an error in words, or an `error` frame naming the id (a frame
that does not decode: `params` not an object) — never silence, never the catch-all "could not answer"
that means a handler failed on input it should have refused, and the connection keeps working."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from klaw.engine.frames import PROTOCOL, ErrorFrame, PongFrame, QueryFrame, ResultFrame
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine.test_forget_what_was_sent import home, running

__all__ = ["home"]  # the fixture

NOT_OBJECTS: list[Any] = [[], ["channel", "chat_id"], "x", 5, None, True]
WRONG_VALUES: list[dict[str, Any]] = [
    {"channel": 5, "chat_id": []},
    {"channel": "cli", "chat_id": {"a": 1}},
    {"channel": "", "chat_id": ""},
    {"channel": "cli", "chat_id": "x" * 5000},
    {"segment_id": "1e999", "limit": -1, "id": [], "action": {}, "name": 3, "query": [], "text": 7},
    {"id": None, "action": "remove", "name": [], "tool": {}, "args": "{", "after": "x", "before": 1.5},
]


async def _known(r: Any) -> list[str]:
    await r.gateway.send(QueryFrame(id="names", query="no-such-query"))
    answer = await asyncio.wait_for(r.gateway.recv(), 30)
    assert isinstance(answer, ResultFrame) and answer.error is not None, answer
    return [name.strip() for name in answer.error.split("known:", 1)[1].split(",")]


async def test_each_query_answers_bad_params_under_its_id(home: KlawHome) -> None:
    async with FakeOpenAiServer() as server, running(home, server) as r:
        names = await _known(r)
        assert "running_tool" in names and "history" in names, names
        for name in names:
            for n, params in enumerate([*NOT_OBJECTS, *WRONG_VALUES]):
                query_id = f"{name}-{n}"
                line = json.dumps({"type": "query", "id": query_id, "query": name, "params": params})
                await r.gateway.send_bytes(line.encode() + b"\n")
                answer = await asyncio.wait_for(r.gateway.recv(), 30)
                if isinstance(answer, ErrorFrame):
                    assert answer.ref == query_id and "params" in answer.message, (name, params, answer)
                    continue
                assert isinstance(answer, ResultFrame) and answer.id == query_id, (name, params, answer)
                if answer.error is not None:
                    assert "could not answer" not in answer.error, (name, params, answer.error)
        await r.gateway.send_bytes(b'{"type": "ping", "id": "still"}\n')
        assert await asyncio.wait_for(r.gateway.recv(), 30) == PongFrame(id="still", protocol=PROTOCOL)
