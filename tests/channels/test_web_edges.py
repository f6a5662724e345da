"""The web page's edges the last stop left (decision 486): a malformed `client_id` answered in the page's
words, and a slash command whose response was lost sent again with the same `client_id` (the page's
outbox does so) run once. The whole stack: fake OpenAI server, engine on its socket, gateway, the web
channel over real HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from klaw.store.records import ChatRef
from tests.channels.test_web_forget_replay import _Page, _signed_in_page, _until


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


async def _first_answer(page: _Page, body: dict[str, str]) -> None:
    """`body` posted with `?wait=20`, and the model's "First answer." in the response."""
    page.stack.server.reply_text("First answer.")
    first = await page.client.post("/api/messages?wait=20", json=body, headers=page.headers)
    assert first.status_code == 200 and first.json()["reply"]["text"] == "First answer.", first.text


async def test_a_message_sent_again_with_wait_gets_its_stored_reply_at_once() -> None:
    """adversary28: a script whose response was lost sends the same message again with the same client_id
    and `?wait=10`: it waited the whole 10 s for `"reply": null`, the engine having stored the message once
    and answered nothing new. Now the stored reply comes back at once, and the model is not asked again."""
    async with _signed_in_page() as page:
        stack, client = page.stack, page.client
        body = {"text": "again", "client_id": "abcdefgh1"}
        await _first_answer(page, body)
        asked = len(stack.server.requests)
        stack.server.reply_text("A second answer nobody should see.")
        again = await client.post("/api/messages?wait=20", json=body, headers=page.headers)
        assert again.status_code == 200, again.text
        answer = again.json()
        assert answer["id"] == "web-main-abcdefgh1" and answer["reply"]["text"] == "First answer.", answer
        assert answer["repeated"] is True
        assert len(stack.server.requests) == asked  # not answered twice


async def _another_text_refused(page: _Page, client_id: str, query: str = "") -> None:
    """Post "a different line" under `client_id`, which holds another text: decision 487's 409, in words that
    name the id and what to do, and that do not repeat the text."""
    other = await page.client.post(
        f"/api/messages{query}", json={"text": "a different line", "client_id": client_id}, headers=page.headers
    )
    assert other.status_code == 409, other.text
    detail = other.json()["detail"]
    assert f"client_id {client_id}" in detail and "another text" in detail and "new client_id" in detail, detail
    assert "different line" not in detail


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
        await _another_text_refused(page, "abcdefgh2", "?wait=5")
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
        await _another_text_refused(page, "abcdefgh3")
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


async def test_posts_racing_under_one_client_id_take_one_text_and_refuse_the_others() -> None:
    """adversary29 (decision 503): two posts with one client_id and different texts, sent at once, both got 200
    with the first's reply; the second text was in no log and nobody was told. The `sent` look-up and the send
    were two steps. Now the engine's accept decides (look-up and store under the id's lock): per client_id
    exactly one text is stored, every sender of another text gets the 409, and a sender of the same text again
    gets that message's reply."""
    async with _signed_in_page() as page:
        client = page.client
        ids = [f"racerace{n:02d}" for n in range(16)]

        async def post(client_id: str, text: str, after: float) -> tuple[str, str, int, dict[str, object]]:
            await asyncio.sleep(after)  # spread over the engine's accepts: some land between a look-up and an add
            body = {"text": text, "client_id": client_id}
            answer = await client.post("/api/messages?wait=30", json=body, headers=page.headers)
            return client_id, text, answer.status_code, answer.json()

        words = ("alpha", "beta", "alpha", "gamma")  # each id's second post a little later than the one before's
        posts = [post(i, f"{w} race {i}", n * k * 0.002) for k, i in enumerate(ids) for n, w in enumerate(words)]
        results = await asyncio.gather(*posts)
        history = (await client.get("/api/history")).json()
        stored = {m["id"]: m["text"] for m in history["messages"] if m["role"] == "user"}
        for client_id in ids:
            mine = [(text, status, body) for i, text, status, body in results if i == client_id]
            taken = {text for text, status, _ in mine if status == 200}
            assert len(taken) == 1, mine  # one text per client_id, never two answered as one
            [text] = taken
            assert stored[f"web-main-{client_id}"] == text
            for other, status, body in mine:
                if other != text:
                    assert status == 409, (other, status, body)
                    assert f"client_id {client_id}" in str(body["detail"]) and other not in str(body["detail"])
                else:
                    reply = body["reply"]
                    assert isinstance(reply, dict) and reply["kind"] == "reply", body
        assert len(stored) == len(ids), stored


async def test_a_post_whose_look_up_was_overtaken_by_another_text_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """adversary29 (decision 503), the window itself, held open: the second post's `sent` look-up answers
    "not stored", then the first post's text is taken and answered, then the second is sent. Before, the
    engine acknowledged it as a resend (one id, one message): 200 with the first's reply, its text in no log.
    Now the engine's accept compares the words and the post is the 409."""
    from klaw.channels.web import api, sent_again

    looked_up = asyncio.Event()
    overtaken = asyncio.Event()
    real = sent_again.sent_before

    async def slow_look_up(ask: Any, chat_id: str, client_id: str, text: str) -> dict[str, Any] | None:
        answer = await real(ask, chat_id, client_id, text)
        if text == "beta race two" and not overtaken.is_set():
            looked_up.set()
            await overtaken.wait()
        return answer

    monkeypatch.setattr(api, "sent_before", slow_look_up)  # the name the handler calls
    async with _signed_in_page() as page:
        client = page.client

        async def post(text: str) -> Any:
            body = {"text": text, "client_id": "racerace01"}
            return await client.post("/api/messages?wait=20", json=body, headers=page.headers)

        beta = asyncio.create_task(post("beta race two"))
        await looked_up.wait()
        alpha = await post("alpha race one")
        assert alpha.status_code == 200 and alpha.json()["reply"]["text"] == "echo: alpha race one", alpha.text
        overtaken.set()
        refused = await beta
        assert refused.status_code == 409, refused.text
        assert "client_id racerace01" in refused.json()["detail"] and "beta" not in refused.json()["detail"]
        history = (await client.get("/api/history")).json()
        assert [m["text"] for m in history["messages"] if m["role"] == "user"] == ["alpha race one"]
        again = await post("alpha race one")  # the same text again: its reply, as before
        assert again.status_code == 200 and again.json()["reply"]["text"] == "echo: alpha race one", again.text


async def test_another_text_queued_while_the_engine_is_down_is_refused_in_the_chat_when_it_is_back() -> None:
    """review54 (decision 506): a post under a client_id whose message is stored, with other words, sent while
    the engine is down, is queued (200: the engine cannot be asked); the engine, back, refuses it (`other_text`).
    Nobody waits for that verdict any more (the post was answered), so the chat must be told, as for any refused
    message; the gateway kept the post's verdict and took the refusal as told to the poster: the page saw nothing."""
    from klaw.engine.runtime import Engine

    async with _signed_in_page() as page:
        stack, client = page.stack, page.client
        await _first_answer(page, {"text": "first text", "client_id": "queuedother1"})
        await stack.engine.shutdown(timeout_seconds=5)
        other = {"text": "a different line", "client_id": "queuedother1"}
        queued = await client.post("/api/messages", json=other, headers=page.headers)
        assert queued.status_code == 200 and queued.json()["queued"] is True, queued.text
        async with client.stream("GET", "/api/events") as events:
            engine = await Engine.start(stack.home, stack.loaded.config)
            try:
                async with asyncio.timeout(20):
                    said = await _until(events.aiter_lines(), "did not accept this message")
                history = (await client.get("/api/history")).json()
            finally:
                await engine.shutdown(timeout_seconds=5)
        kind, data = said[-1]
        assert kind == "error" and "other words" in data["text"] and "different line" not in data["text"], said
        assert [m["text"] for m in history["messages"] if m["role"] == "user"] == ["first text"], history


async def test_a_wait_that_is_not_a_number_of_seconds_is_said_so() -> None:
    """adversary29 (decision 503): `?wait=nan` was answered "wait: Input should be less than or equal to 600"."""
    async with _signed_in_page() as page:
        for wait in ("nan", "inf", "-1", "601", "soon"):
            answer = await page.client.post(f"/api/messages?wait={wait}", json={"text": "hi"}, headers=page.headers)
            assert answer.status_code == 422, answer.text
            assert answer.json()["detail"] == (
                "wait: the seconds to wait for the reply, a number from 0 to 600 (0: do not wait)"
            ), wait
        history = (await page.client.get("/api/history")).json()
        assert not [m for m in history["messages"] if m["role"] == "user"]  # nothing was sent
