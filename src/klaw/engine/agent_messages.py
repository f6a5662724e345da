"""The engine's side of `message_send` (klaw/tools/messaging/send.py): a message from the agent, written
in one chat, recorded in another chat's log as the agent's and delivered there
(docs/decisions/108-message-send.md).

The record is an assistant message with `{"source": "message_send", "from": "<chat>"}` in its metadata,
taken under the target chat's turn lock like a scheduled task's answer, so the target chat's window and
its later turns see it. A channel no gateway serves right now still gets it recorded, and the socket
queues the delivery until a gateway says hello (in memory, but the record stays undelivered in the store, so
an engine restarted within the hour sends it again at start, decision 101: the tool result says so); an
engine without a socket (one run through the library without it) reaches only its in-process channels, so
other targets are refused before anything is recorded; `klaw chat` has the socket. The console is never
served by a gateway (it is `klaw chat`'s own terminal), so an engine without one refuses it too rather
than queueing for a gateway that never comes. Sends to one chat go one at a time, in the order they
were made: the calls of one answer run concurrently, and a later one must not take the earlier one's
recording for a turn running there (it was told "web:main is in the middle of a turn" when none ran).
Logged: source, target and length, never the text.
"""

from __future__ import annotations

import asyncio
import logging

from klaw.engine.delivery import Delivery
from klaw.engine.processor import MessageProcessor
from klaw.store.records import ChatRef
from klaw.tools.messaging.send import CONSOLE_CHANNEL, Sent

log = logging.getLogger(__name__)


class AgentMessages:
    """`MessageSender` on the engine's processor (records, turn locks) and delivery (routes)."""

    def __init__(self, processor: MessageProcessor, delivery: Delivery) -> None:
        self._processor = processor
        self._delivery = delivery
        self._sending: dict[ChatRef, asyncio.Lock] = {}

    async def send(self, source: ChatRef, target: ChatRef, text: str) -> Sent:
        # Held while the message is recorded, or handed to the background when a turn runs there (which
        # never waits for this lock), so a send never waits for a turn here: no two turns wait on each other.
        async with self._sending.setdefault(target, asyncio.Lock()):
            return await self._send(source, target, text)

    def reaches(self, target: ChatRef) -> bool:
        """Whether `send` would record a message to `target` now: its channel is served (an in-process
        sink, a gateway, an attached `klaw chat` for the console), or a gateway may come for it later (the
        socket queues; never for the console, which no gateway serves but an attached terminal). The one
        question `send` asks, asked first by `message_send`'s argument check so that `tools.approval`
        never asks about a send that cannot happen (newcomer15)."""
        if self._delivery.reachable(target.channel):
            return True
        return target.channel != CONSOLE_CHANNEL and self._delivery.can_queue

    async def _send(self, source: ChatRef, target: ChatRef, text: str) -> Sent:
        reachable = self._delivery.reachable(target.channel)
        if not self.reaches(target):
            log.info("message_send from %s to %s refused: channel %s unreachable", source, target, target.channel)
            return Sent.UNREACHABLE
        now = await self._processor.post(target, text, {"source": "message_send", "from": str(source)})
        sent = Sent.AFTER_TURN if not now else Sent.DELIVERED if reachable else Sent.QUEUED
        log.info("message_send from %s to %s: %s (%d characters)", source, target, sent.value, len(text))
        return sent
