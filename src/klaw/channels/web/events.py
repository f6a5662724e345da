"""Fan-out of the web chat's events (reply pieces, replies, notices, errors) to open browser tabs.

Each tab holds a server-sent-events stream with a queue of its own. Events are numbered and the
last `HISTORY` are kept, so a tab whose stream dropped (laptop asleep, proxy timeout) reconnects
with `Last-Event-ID` and gets what it missed. A tab that stops reading is cut off once its queue is
full rather than letting memory grow; its browser reconnects and catches up from the history.
A page opening the stream for the first time gives the number it read with the chat's history
(`since`), so a reply that came between the two is replayed too. A forget in the chat drops its kept
events (`forget_chat`): what the person erased is not replayed from here either.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from klaw.ascii_digits import digits

HISTORY = 200
QUEUE_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    kind: str  # delta | reply | notice | error
    data: dict[str, Any]

    def encode(self) -> str:
        """The event in text/event-stream framing."""
        return f"id: {self.id}\nevent: {self.kind}\ndata: {json.dumps(self.data)}\n\n"


class Subscription:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(QUEUE_LIMIT)

    async def next(self) -> Event | None:
        """The next event; None when the hub closed or this subscriber fell too far behind."""
        return await self.queue.get()


class EventHub:
    def __init__(self) -> None:
        self._history: deque[Event] = deque(maxlen=HISTORY)
        self._subscribers: set[Subscription] = set()
        self._next_id = 1
        self._closed = False

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @property
    def last_id(self) -> int:
        """The newest event's number (0: none yet): a page loading the chat's history notes it first and
        opens its stream after it, so a reply published in between is replayed, not missed."""
        return self._next_id - 1

    def publish(self, kind: str, data: dict[str, Any]) -> Event:
        event = Event(self._next_id, kind, data)
        self._next_id += 1
        self._history.append(event)
        for subscription in list(self._subscribers):
            try:
                subscription.queue.put_nowait(event)
            except asyncio.QueueFull:
                self._drop(subscription)
        return event

    def forget_chat(self, chat_id: str) -> int:
        """Drop the kept events of `chat_id` (after a forget in that chat): a tab reconnecting from an
        earlier number must not get back a reply the person erased. Returns how many were dropped."""
        kept = [event for event in self._history if event.data.get("chat_id") != chat_id]
        dropped = len(self._history) - len(kept)
        self._history = deque(kept, maxlen=HISTORY)
        return dropped

    @asynccontextmanager
    async def subscribe(self, last_event_id: str | None = None) -> AsyncIterator[Subscription]:
        """A subscription, first replaying the kept events after `last_event_id` (if given)."""
        subscription = Subscription()
        if self._closed:
            subscription.queue.put_nowait(None)
        else:
            if last_event_id is not None and digits(last_event_id):
                for event in self._history:
                    if event.id > int(last_event_id):
                        subscription.queue.put_nowait(event)
            self._subscribers.add(subscription)
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)

    def close(self) -> None:
        """End every stream (the page is stopping), so the web server can shut down at once."""
        self._closed = True
        for subscription in list(self._subscribers):
            self._drop(subscription)

    def _drop(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        while True:  # make room for the end marker
            try:
                subscription.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                subscription.queue.get_nowait()
