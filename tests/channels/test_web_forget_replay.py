"""After a forget, the web page's kept events no longer hold what was erased: a tab reconnecting with
`Last-Event-ID: 0` (or any earlier number) got the forgotten reply back from the gateway's memory
(adversary6), although the history, the log and the database had lost it. `/forget` typed on the page
and `klaw memory forget` beside the engine (its socket query) both send a notice marked `forgotten`;
the web channel drops the chat's kept events and the page reloads its history.
The whole stack: fake OpenAI server, engine on its socket, gateway, the web channel over real HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from klaw.channels.web.auth import CSRF_HEADER
from klaw.channels.web.channel import WebChannel
from klaw.engine.frames import InboundFrame, QueryFrame
from klaw.engine.one_query import ask
from klaw.store.records import ChatRef
from tests.channels.stack import Stack, running_stack
from tests.channels.test_web_app import session_csrf
from tests.channels.test_web_guard import sign_in_with, web_channel

SECRET_REPLY = "Your locker code is HUNTER2-FORGETME."
LATER_REPLY = "The second secret is SWORDFISH-42."
NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def _until(stream: AsyncIterator[str], wanted: str) -> list[tuple[str, dict[str, Any]]]:
    """The events (but deltas) up to the first whose text holds `wanted`."""
    events: list[tuple[str, dict[str, Any]]] = []
    kind = ""
    async for line in stream:
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:") and kind != "delta":
            data = json.loads(line.removeprefix("data:"))
            events.append((kind, data))
            if wanted in data.get("text", ""):
                return events
    return events


async def _replayed(client: httpx.AsyncClient, until: str) -> list[tuple[str, dict[str, Any]]]:
    async with client.stream("GET", "/api/events", headers={"Last-Event-ID": "0"}) as events:
        return await _until(events.aiter_lines(), until)


@dataclass(frozen=True)
class _Page:
    """The whole stack and one page signed in to it: its HTTP client and the CSRF header it posts with."""

    stack: Stack
    client: httpx.AsyncClient
    headers: dict[str, str]

    async def said(self, text: str, wanted: str) -> list[tuple[str, dict[str, Any]]]:
        """`text` posted as the page posts it, and the events that followed until one saying `wanted`."""
        async with self.client.stream("GET", "/api/events") as events:
            sent = await self.client.post("/api/messages", json={"text": text}, headers=self.headers)
            assert sent.status_code == 200, sent.text
            return await _until(events.aiter_lines(), wanted)


@asynccontextmanager
async def _signed_in_page() -> AsyncIterator[_Page]:
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder)) as stack:
        web = holder[0]
        async with httpx.AsyncClient(base_url=web.url.rstrip("/"), timeout=30) as client:
            await sign_in_with(client, web.token)
            yield _Page(stack, client, {CSRF_HEADER: await session_csrf(client)})


async def test_forgotten_replies_are_not_replayed_to_a_tab_that_reconnects() -> None:
    async with _signed_in_page() as page:
        stack, client, said = page.stack, page.client, page.said
        stack.server.reply_text(SECRET_REPLY)
        await said("what is my locker code?", SECRET_REPLY)
        assert any(SECRET_REPLY in data.get("text", "") for _, data in await _replayed(client, SECRET_REPLY))

        [*_, (kind, notice)] = await said("/forget last", "erased from klaw.db")
        assert kind == "notice" and notice["forgotten"] is True
        replayed = await _replayed(client, "erased from klaw.db")
        assert not [data for _, data in replayed if "HUNTER2" in json.dumps(data)], replayed
        history = (await client.get("/api/history")).json()
        assert "HUNTER2" not in json.dumps(history)

        stack.server.reply_text(LATER_REPLY)
        await said("and the second one?", LATER_REPLY)
        latest = await stack.engine.store.history.latest_exchange_id(ChatRef("web", "main"))
        params = {"kind": "exchange", "id": str(latest), "channel": "web", "chat_id": "main", "confirm": True}
        async with client.stream("GET", "/api/events") as events:  # `klaw memory forget exchange N --yes`
            answered = await ask(stack.home.socket_path, QueryFrame(id="f1", query="forget", params=params), 30)
            assert answered.error is None, answered.error
            [*_, (kind, notice)] = await _until(events.aiter_lines(), "klaw memory forget")
        assert kind == "notice" and notice["forgotten"] is True
        assert notice["text"].startswith(f"Forgotten with klaw memory forget: exchange {latest} (")
        replayed = await _replayed(client, "Forgotten with klaw memory forget")
        assert not [data for _, data in replayed if "SWORDFISH" in json.dumps(data)], replayed


async def test_a_refused_forget_is_not_marked_forgotten_and_the_page_keeps_its_events() -> None:
    """`/forget segment abc` (and `/forget` alone) erase nothing: their notice is not marked `forgotten`,
    so the page does not reload the chat and the kept events stay (the frame once carried `forgotten: true`
    for any `/forget`, by its name). Both ways a gateway sends it: a `command` frame (the page's) and
    typed text in an `inbound` frame."""
    async with _signed_in_page() as page:
        stack, client = page.stack, page.client

        async def said(text: str, wanted: str) -> tuple[str, dict[str, Any]]:
            return (await page.said(text, wanted))[-1]

        stack.server.reply_text(SECRET_REPLY)
        await said("what is my locker code?", SECRET_REPLY)
        for typed in ("/forget segment abc", "/forget", "/forget memory 3"):
            kind, notice = await said(typed, "Cannot forget")
            assert kind == "notice" and "forgotten" not in notice, (typed, notice)
        async with client.stream("GET", "/api/events") as events:
            # a gateway may send a command as typed text too (an `inbound` frame), read as the console's
            frame = InboundFrame(id="i1", channel="web", chat_id="main", text="/forget segment abc", created_at=NOW)
            await stack.gateway.buffer.append(frame)
            stack.gateway.link.kick()
            kind, notice = (await _until(events.aiter_lines(), "Cannot forget"))[-1]
        assert kind == "notice" and "forgotten" not in notice, notice
        assert any(SECRET_REPLY in data.get("text", "") for _, data in await _replayed(client, SECRET_REPLY))
        kind, notice = await said("/forget last", "erased from klaw.db")
        assert kind == "notice" and notice["forgotten"] is True
