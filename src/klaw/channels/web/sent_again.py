"""A web message sent again under a `client_id` the engine already holds (decision 487).

The page's outbox and a script whose response was lost both post a message again with its `client_id`;
the engine keeps one message per id (`web-<chat>-<client_id>`, decision 479), so the second post has
nothing new to answer. Before it is sent, the engine is asked (`sent` query) whether it holds that id:
the same text with a reply gets that reply at once (a `?wait=N` no longer waits N seconds for null);
another text under the id is refused in words (409), not stored and dropped unseen. With the engine
down (or one older than the query) the post goes on as before: the gateway's buffer stores it once.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from klaw.gateway.link import EngineUnavailable, QueryFailed
from klaw.gateway.service import Submitted

VERDICT_SECONDS = 10.0
"""How long a post under a `client_id` waits for the engine to take its frame (milliseconds when it is up)."""

Ask = Callable[[str, dict[str, Any]], Awaitable[Any]]


def message_id_for(chat_id: str, client_id: str) -> str:
    """The message id a page's `client_id` gives its message: the same on every re-send."""
    return f"web-{chat_id}-{client_id}"


def reused(client_id: str) -> str:
    """The 409's sentence: which id, what is wrong, what to do; never the text."""
    return (
        f"client_id {client_id} was already used for another text; a message sent again must keep its text."
        " For a new message use a new client_id (a fresh UUID's hex, say); this one was not sent"
    )


async def sent_before(ask: Ask, chat_id: str, client_id: str, text: str) -> dict[str, Any] | None:
    """The engine's `sent` answer for this id (`stored`, `same_text`, `reply`), or None when it cannot
    say (down, or an engine without the query): the post then goes on as a first one."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    params = {"channel": "web", "chat_id": chat_id, "id": message_id_for(chat_id, client_id), "sha256": digest}
    try:
        answer = await ask("sent", params)
    except (EngineUnavailable, QueryFailed):
        return None
    return answer if isinstance(answer, dict) and answer.get("stored") else None


async def refused_as_other_text(submitted: Submitted) -> bool:
    """Whether the engine refused this post's frame because the chat's message under its id has other words
    (decision 503). The `sent` look-up before sending and the buffer's check (500) leave a window: two posts
    racing, the first taken between the second's look-up and its add. The engine's accept is the one step
    that cannot be raced (`Ingestion.accept_once` under the id's lock), so its verdict is waited for while
    the engine is connected; while it is down the post is queued and that check happens when it is sent: then
    nobody waits for the verdict, so it is given up at once and a refusal is told in the chat, as for any
    refused message (before, the gateway took it as told to this post, and the page saw nothing: decision 506)."""
    taken = submitted.taken
    if taken is None:
        return False
    if submitted.queued:
        taken.cancel()
        return False
    try:
        async with asyncio.timeout(VERDICT_SECONDS):
            error = await asyncio.shield(taken)
    except TimeoutError:
        taken.cancel()  # settled later: the chat is told, as for any refused message
        return False
    return error is not None and error.code == "other_text"
