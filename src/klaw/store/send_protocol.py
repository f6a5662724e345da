"""The places `message_send` took in each target chat's last hour, kept in the store (decision 418).

Apart from the repositories of what is remembered (klaw/store/protocol.py): a row here is no message,
only the moment one went to a chat, so that `tools.messageSendsPerChatPerHour` holds across a restart
and across the engines and processes sharing a store. Reserving is one atomic step per target chat:
count its last hour and take a place only under the cap, so two sends at once (one answer's parallel
calls, two chats, two engines) each see the other's place. A place dated after the reservation's time
(the clock ran ahead and was set right) counts as taken at that time: kept for the hour from then, not
for as long as the clock was ahead (adversary21: a year).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from klaw.store.records import ChatRef

SEND_WINDOW = timedelta(hours=1)
SEND_WINDOW_MS = int(SEND_WINDOW.total_seconds() * 1000)  # the stores keep `sent_at` in milliseconds


@dataclass(frozen=True, slots=True)
class SendPlace:
    """What `reserve` found: the place taken (`place`, for `give_back`), or None when the target's last
    hour is full; `in_hour` counts its sends in the hour before this one, `oldest` is the first of them."""

    place: int | None
    in_hour: int
    oldest: datetime | None


class SendRepository(Protocol):
    """`sends`: one row per message `message_send` sent (or is sending), kept for an hour."""

    async def reserve(self, target: ChatRef, at: datetime, per_hour: int) -> SendPlace:
        """Take a place for a send into `target` at `at` if fewer than `per_hour` went there in the hour
        before; atomic against every other `reserve` of the same target, in any process. Rows older
        than the hour (every target's) are deleted in the same step."""
        ...

    async def give_back(self, place: int) -> None:
        """The send of `place` reached nobody: it no longer counts."""
        ...
