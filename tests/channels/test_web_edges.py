"""The web page's edges the last stop left (decision 486): a malformed `client_id` answered in the page's
words, and a slash command whose response was lost sent again with the same `client_id` (the page's
outbox does so) run once. The whole stack: fake OpenAI server, engine on its socket, gateway, the web
channel over real HTTP."""

from __future__ import annotations

import json

from klaw.store.records import ChatRef
from tests.channels.test_web_forget_replay import _signed_in_page, _until


async def test_a_malformed_client_id_is_refused_in_words_and_nothing_is_sent() -> None:
    async with _signed_in_page() as page:
        for client_id in ("short", "has a space in it", "x" * 65, 42):
            sent = await page.client.post(
                "/api/messages", json={"text": "hello", "client_id": client_id}, headers=page.headers
            )
            assert sent.status_code == 422
            detail = sent.json()["detail"]
            assert isinstance(detail, str), detail  # one sentence, not FastAPI's list of errors
            assert detail == (
                "client_id: the page's own id for the message must be 8 to 64 letters, digits, '-' or '_'"
                " (a UUID's hex, say); send it so, or leave it out; nothing was sent"
            ), detail
            assert "hello" not in detail and "pattern" not in detail
        assert await page.stack.engine.store.messages.latest_created_at(ChatRef("web", "main")) is None


async def test_a_command_sent_again_after_its_response_was_lost_runs_once() -> None:
    """`/new` posted, its response lost (a dropped connection), posted again by the page's outbox with the
    same client_id: one new segment, not two; the second answer says the same as the first."""
    async with _signed_in_page() as page:
        stack, client = page.stack, page.client
        stack.server.reply_text("Hello there.")
        await page.said("hello", "Hello there.")
        chat = ChatRef("web", "main")
        before = len(await stack.engine.store.segments.list(chat))
        body = {"text": "/new", "client_id": "page-new-00000001"}
        answers = []
        for _ in range(2):
            async with client.stream("GET", "/api/events") as events:
                sent = await client.post("/api/messages", json=body, headers=page.headers)
                assert sent.status_code == 200, sent.text
                answers.append((await _until(events.aiter_lines(), "new conversation"))[-1])
        assert len(await stack.engine.store.segments.list(chat)) == before + 1, json.dumps(answers)
