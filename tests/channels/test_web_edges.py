"""The web page's edges the last stop left (decision 486): a malformed `client_id` answered in the page's
words, and a slash command whose response was lost sent again with the same `client_id` (the page's
outbox does so) run once. The whole stack: fake OpenAI server, engine on its socket, gateway, the web
channel over real HTTP."""

from __future__ import annotations

import asyncio
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


async def test_a_message_sent_again_with_wait_gets_its_stored_reply_at_once() -> None:
    """adversary28: a script whose response was lost sends the same message again with the same client_id
    and `?wait=10`: it waited the whole 10 s for `"reply": null`, the engine having stored the message once
    and answered nothing new. Now the stored reply comes back at once, and the model is not asked again."""
    async with _signed_in_page() as page:
        stack, client = page.stack, page.client
        stack.server.reply_text("First answer.")
        body = {"text": "again", "client_id": "abcdefgh1"}
        first = await client.post("/api/messages?wait=20", json=body, headers=page.headers)
        assert first.status_code == 200 and first.json()["reply"]["text"] == "First answer.", first.text
        asked = len(stack.server.requests)
        stack.server.reply_text("A second answer nobody should see.")
        again = await client.post("/api/messages?wait=20", json=body, headers=page.headers)
        assert again.status_code == 200, again.text
        answer = again.json()
        assert answer["id"] == "web-main-abcdefgh1" and answer["reply"]["text"] == "First answer.", answer
        assert answer["repeated"] is True
        assert len(stack.server.requests) == asked  # not answered twice


async def test_another_text_under_a_used_client_id_is_refused_in_words() -> None:
    """adversary28: a different text under a client_id already used got 200 and was silently dropped (the
    engine keeps one message per id). Now a 409 says so and what to do; nothing is stored."""
    async with _signed_in_page() as page:
        stack, client = page.stack, page.client
        stack.server.reply_text("Noted.")
        first = await client.post(
            "/api/messages?wait=20", json={"text": "first text", "client_id": "abcdefgh2"}, headers=page.headers
        )
        assert first.status_code == 200, first.text
        other = await client.post(
            "/api/messages?wait=5", json={"text": "a different line", "client_id": "abcdefgh2"}, headers=page.headers
        )
        assert other.status_code == 409, other.text
        detail = other.json()["detail"]
        assert "client_id abcdefgh2" in detail and "another text" in detail and "new client_id" in detail, detail
        assert "different line" not in detail
        history = await client.get("/api/history")
        assert [m["text"] for m in history.json()["messages"] if m["role"] == "user"] == ["first text"]


async def test_another_text_under_a_client_id_the_gateway_holds_is_refused_while_the_engine_is_down() -> None:
    """adv28a (decision 500): with the engine down, the engine cannot be asked whether the id was used; the
    gateway's buffer holds the first text under it, and a different text was taken (200) and dropped unseen.
    Now the same 409 in words; the same text again is the same message; the engine, back, stores one."""
    from klaw.engine.runtime import Engine

    async with _signed_in_page() as page:
        stack, client = page.stack, page.client
        await stack.engine.shutdown(timeout_seconds=5)
        body = {"text": "first text", "client_id": "abcdefgh3"}
        first = await client.post("/api/messages", json=body, headers=page.headers)
        assert first.status_code == 200 and first.json()["queued"] is True, first.text
        again = await client.post("/api/messages", json=body, headers=page.headers)
        assert again.status_code == 200, again.text  # the page's outbox sending it again: the same message
        other = await client.post(
            "/api/messages", json={"text": "a different line", "client_id": "abcdefgh3"}, headers=page.headers
        )
        assert other.status_code == 409, other.text
        detail = other.json()["detail"]
        assert "client_id abcdefgh3" in detail and "another text" in detail and "new client_id" in detail, detail
        assert "different line" not in detail
        command = await client.post(
            "/api/messages", json={"text": "/new", "client_id": "abcdefgh3"}, headers=page.headers
        )
        assert command.status_code == 409, command.text

        stack.server.reply_text("Back and answered.")
        engine = await Engine.start(stack.home, stack.loaded.config)
        try:
            for _ in range(200):
                shown = (await client.get("/api/history")).json()  # an error while the gateway reconnects
                users = [m for m in shown.get("messages", []) if m["role"] == "user"]
                if users:
                    break
                await asyncio.sleep(0.1)
            assert [m["text"] for m in users] == ["first text"]
        finally:
            await engine.shutdown(timeout_seconds=5)
