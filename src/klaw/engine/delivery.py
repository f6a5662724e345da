"""Where replies go: a sink per channel (the in-process console), else a fallback (the socket).

The processor only says "deliver this to that chat"; the runtime decides how each channel is
reached, so the same engine serves `klaw chat` in one process and gateways over the socket.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from klaw.store.records import ChatRef

log = logging.getLogger(__name__)

OutboundKind = Literal["reply", "notice", "error"]


@dataclass(frozen=True)
class Outbound:
    chat: ChatRef
    text: str
    reply_to: str | None = None
    kind: OutboundKind = "reply"


Sink = Callable[[Outbound], Awaitable[None]]


class Delivery:
    def __init__(self) -> None:
        self._sinks: dict[str, Sink] = {}
        self._fallback: Sink | None = None

    def register(self, channel: str, sink: Sink) -> None:
        self._sinks[channel] = sink

    def set_fallback(self, sink: Sink) -> None:
        self._fallback = sink

    async def deliver(self, outbound: Outbound) -> None:
        sink = self._sinks.get(outbound.chat.channel, self._fallback)
        if sink is None:
            log.warning("no route for channel %s; a %s was not delivered", outbound.chat.channel, outbound.kind)
            return
        await sink(outbound)
