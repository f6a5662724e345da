"""Through a real engine socket: replies streamed as deltas, and the inspector's read-only queries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from klaw.config_loader import LoadedConfig
from klaw.engine.frames import DeltaFrame, OutboundFrame
from klaw.gateway.link import QueryFailed
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.channels.stack import running_stack


class RecordingChannel:
    def __init__(self, name: str = "web", streaming: bool = True) -> None:
        self.name = name
        self.streaming = streaming
        self.frames: list[OutboundFrame | DeltaFrame] = []
        self.changed = asyncio.Condition()

    async def start(self, gateway: Gateway) -> None: ...

    async def stop(self) -> None: ...

    async def deliver(self, frame: OutboundFrame) -> None:
        await self._add(frame)

    async def delta(self, frame: DeltaFrame) -> None:
        await self._add(frame)

    async def _add(self, frame: OutboundFrame | DeltaFrame) -> None:
        async with self.changed:
            self.frames.append(frame)
            self.changed.notify_all()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(predicate)

    def outbound(self) -> list[OutboundFrame]:
        return [f for f in self.frames if isinstance(f, OutboundFrame)]


def channels(*made: RecordingChannel) -> Any:
    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[RecordingChannel]:
        return list(made)

    return make


async def test_a_streaming_channel_gets_the_reply_in_pieces_then_whole() -> None:
    web, other = RecordingChannel("web"), RecordingChannel("batch", streaming=False)
    async with running_stack(channels(web, other)) as stack:
        stack.server.reply_text("one two three four five")
        sent = await stack.gateway.submit("web", "main", "count for me")
        await web.wait_for(lambda: len(web.outbound()) == 1)
        deltas = [f for f in web.frames if isinstance(f, DeltaFrame)]
        assert len(deltas) > 1 and all(d.reply_to == sent.id for d in deltas)
        assert "".join(d.text for d in deltas) == "one two three four five"
        whole = web.frames[-1]
        assert isinstance(whole, OutboundFrame) and whole.id  # the reply's record id, confirmed once shown
        reply_id = whole.id
        assert web.frames[-1] == OutboundFrame(
            channel="web",
            chat_id="main",
            text="one two three four five",
            reply_to=sent.id,
            kind="reply",
            id=reply_id,
            answers=(sent.id,),
            origin="web",  # the web channel's gateway sent it (decision 535)
        )
        stack.server.reply_text("whole only")
        await stack.gateway.submit("batch", "b1", "hi")
        await other.wait_for(lambda: len(other.frames) == 1)
        assert [f.type for f in other.frames] == ["outbound"]
        assert not stack.server.chat_requests[-1].body.get("stream")
        assert stack.server.chat_requests[0].body["stream"] is True


async def test_inspector_queries_answer_from_the_engine() -> None:
    web = RecordingChannel("web")
    async with running_stack(channels(web)) as stack:
        first = await stack.gateway.submit("web", "main", "my cat is called Miso and likes tuna")
        await web.wait_for(lambda: len(web.outbound()) == 1)
        await stack.gateway.submit("web", "main", "/new")
        await web.wait_for(lambda: len(web.outbound()) == 2)
        await stack.gateway.submit("web", "main", "what about dogs?")
        await web.wait_for(lambda: len(web.outbound()) == 3)

        chats = await stack.gateway.query("chats", {})
        assert {"channel": "web", "chat_id": "main"} in chats["chats"]

        turns = (await stack.gateway.query("turns", {"channel": "web", "chat_id": "main"}))["turns"]
        assert len(turns) == 2
        newest = turns[0]
        assert newest["model"] == "fake/small" and newest["budget"] == 3600
        layers = {layer["name"]: layer for layer in newest["layers"]}
        assert layers["system_prompt"]["tokens"] > 0 and layers["pending"]["items"] == 1
        assert newest["total_tokens"] == sum(layer["tokens"] for layer in newest["layers"])
        tools = layers["tools"]
        assert len(tools["parts"]) == tools["items"]
        assert {"web_fetch", "current_time"} <= {part["name"] for part in tools["parts"]}
        assert all(part["tokens"] > 0 for part in tools["parts"])
        assert turns[1]["reply_to"] == first.id

        segments = (await stack.gateway.query("segments", {"channel": "web", "chat_id": "main"}))["segments"]
        assert len(segments) == 2 and segments[0]["ended_at"] is None and segments[1]["messages"] == 2
        detail = await stack.gateway.query("segment", {"segment_id": segments[1]["id"]})
        assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
        assert detail["exchanges"][0]["status"] == "completed"
        assert detail["exchanges"][0]["user_text"] == "my cat is called Miso and likes tuna"
        assert detail["summaries"] == []

        hits = (await stack.gateway.query("search", {"channel": "web", "chat_id": "main", "text": "Miso tuna"}))["hits"]
        assert len(hits) == 2 and all("Miso" in hit["text"] and hit["fts_rank"] and hit["score"] > 0 for hit in hits)
        # Fewer hits asked: the same ranking cut shorter, with the same scores (as `klaw memory search` shows).
        params = {"channel": "web", "chat_id": "main", "text": "Miso tuna", "limit": 1}
        [first] = (await stack.gateway.query("search", params))["hits"]
        assert (first["text"], first["score"]) == (hits[0]["text"], hits[0]["score"])


async def test_a_chats_segments_are_numbered_from_one_whatever_other_chats_hold() -> None:
    """Segment ids run across all chats: the page numbered a chat's first conversation 2 (decision 275)."""
    web = RecordingChannel("web")
    async with running_stack(channels(web)) as stack:
        await stack.gateway.submit("web", "other", "an earlier chat about the lighthouse")
        await web.wait_for(lambda: len(web.outbound()) == 1)
        await stack.gateway.submit("web", "main", "my cat Miso likes tuna")
        await web.wait_for(lambda: len(web.outbound()) == 2)
        await stack.gateway.submit("web", "main", "/new")
        await web.wait_for(lambda: len(web.outbound()) == 3)
        await stack.gateway.submit("web", "main", "Miso again")
        await web.wait_for(lambda: len(web.outbound()) == 4)
        main = {"channel": "web", "chat_id": "main"}
        segments = (await stack.gateway.query("segments", main))["segments"]
        assert [s["number"] for s in segments] == [2, 1]  # newest first
        assert segments[1]["id"] > 1  # the other chat's segment came first
        detail = await stack.gateway.query("segment", {"segment_id": segments[1]["id"]})
        assert detail["segment"]["number"] == 1
        hits = (await stack.gateway.query("search", {**main, "text": "Miso"}))["hits"]
        number_of = {s["id"]: s["number"] for s in segments}
        assert hits and all(hit["segment_number"] == number_of[hit["segment_id"]] for hit in hits)
        assert {hit["segment_number"] for hit in hits} == {1, 2}


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nonsense", {}, "unknown query"),
        ("turns", {}, "channel and chat_id"),
        ("turns", {"channel": "Bad Channel!", "chat_id": "x"}, "channel name"),
        ("segment", {"segment_id": "abc"}, "segment_id must be a whole number"),
        ("segment", {"segment_id": 999}, "no segment 999"),
        ("search", {"channel": "web", "chat_id": "main", "text": " "}, "type something"),
    ],
)
async def test_bad_queries_get_a_sentence_back(name: str, params: dict[str, Any], message: str) -> None:
    async with running_stack(channels(RecordingChannel("web"))) as stack:
        with pytest.raises(QueryFailed, match=message):
            await stack.gateway.query(name, params)


async def test_history_is_the_chat_as_seen_and_a_task_answer_names_its_task() -> None:
    web = RecordingChannel("web")
    async with running_stack(channels(web)) as stack:
        stack.server.reply_text("first answer")
        first = await stack.gateway.submit("web", "main", "first question")
        await web.wait_for(lambda: len(web.outbound()) == 1)
        await stack.gateway.submit("web", "main", "/new")
        await web.wait_for(lambda: len(web.outbound()) == 2)
        stack.server.reply_text("second answer")
        await stack.gateway.submit("web", "main", "second question")
        await web.wait_for(lambda: len(web.outbound()) == 3)
        task = {"source": "task", "task": "morning digest", "origin": "schedule"}
        await stack.engine.processor.inject(ChatRef("web", "main"), "Your digest: all quiet.", task)
        await web.wait_for(lambda: len(web.outbound()) == 4)
        assert web.outbound()[-1].task == "morning digest" and web.outbound()[-1].reply_to is None
        assert web.outbound()[2].task is None

        history = await stack.gateway.query("history", {"channel": "web", "chat_id": "main"})
        messages = history["messages"]
        assert [(m["role"], m["text"]) for m in messages] == [
            ("user", "first question"),
            ("assistant", "first answer"),
            ("user", "second question"),
            ("assistant", "second answer"),
            ("assistant", "Your digest: all quiet."),
        ]
        assert messages[0]["id"] == first.id and history["complete"] is True
        assert messages[0]["segment_id"] == messages[1]["segment_id"] != messages[2]["segment_id"]
        assert [m["task"] for m in messages] == [None, None, None, None, "morning digest"]
        last_two = await stack.gateway.query("history", {"channel": "web", "chat_id": "main", "limit": 2})
        assert [m["text"] for m in last_two["messages"]] == ["second answer", "Your digest: all quiet."]
        assert last_two["complete"] is False
        nobody = await stack.gateway.query("history", {"channel": "web", "chat_id": "nobody"})
        assert nobody == {"messages": [], "complete": True}


async def test_the_settings_query_names_what_commands_changed() -> None:
    web = RecordingChannel("web")
    async with running_stack(channels(web)) as stack:
        assert await stack.gateway.query("settings", {}) == {"overrides": []}
        for n, command in enumerate(["/rag set conversation_limit 5", "/summarizer off", "/rag off"], start=1):
            await stack.gateway.submit("web", "main", command)
            await web.wait_for(partial(lambda count: len(web.outbound()) == count, n))
        overrides = (await stack.gateway.query("settings", {}))["overrides"]
        assert {(o["field"], o["value"], o["command"]) for o in overrides} == {
            ("summarizer.enabled", False, "/summarizer"),
            ("rag.enabled", False, "/rag"),
            ("rag.conversationLimit", 5, "/rag set"),
        }
