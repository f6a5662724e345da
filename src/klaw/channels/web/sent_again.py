"""A web message sent again under a `client_id` the engine already holds (decision 487).

The page's outbox and a script whose response was lost both post a message again with its `client_id`;
the engine keeps one message per id (`web-<chat>-<client_id>`, decision 479), so the second post has
nothing new to answer. Before it is sent, the engine is asked (`sent` query) whether it holds that id:
the same text with a reply gets that reply at once (a `?wait=N` no longer waits N seconds for null);
another text under the id is refused in words (409), not stored and dropped unseen. With the engine
down (or one older than the query) the post goes on as before: the gateway's buffer stores it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from klaw.gateway.link import EngineUnavailable, QueryFailed

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
