"""`SendLimits` (tools/messaging/limits.py): one target's sends go one at a time in the order they were
asked, whichever order the store answers in, and the per-target locks that keep that order are dropped
once nobody waits: an engine that sent to thousands of chats keeps none of them (stop 45's open end).
The store here answers each reservation after a delay of its own, the later ones first."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from klaw.store.records import ChatRef
from klaw.store.send_protocol import SendPlace
from klaw.tools.messaging.limits import SendLimits
from klaw.tools.schema import ToolContext


class _SlowFirstPlaces:
    """A `SendRepository` answering the first reservations last; places never run out."""

    def __init__(self) -> None:
        self.taken = 0

    async def reserve(self, target: ChatRef, at: datetime, per_hour: int) -> SendPlace:
        self.taken += 1
        await asyncio.sleep(0.02 / self.taken)
        return SendPlace(place=self.taken, in_hour=0, oldest=None)

    async def give_back(self, place: int) -> None:
        return None


async def test_one_targets_sends_keep_their_order_and_no_lock_outlives_them(tmp_path: Path) -> None:
    limits = SendLimits(per_turn=1000, per_chat_per_hour=1000, places=_SlowFirstPlaces())
    context = ToolContext(chat=ChatRef("web", "main"), workspace=tmp_path)
    sent: list[tuple[str, int]] = []

    async def send(target: ChatRef, part: int) -> None:
        async with limits.reserve(context, target):
            await asyncio.sleep(0)
            sent.append((target.chat_id, part))

    targets = [ChatRef("telegram", str(n)) for n in range(50)]
    await asyncio.gather(*(send(target, part) for part in range(4) for target in targets))

    for target in targets:
        assert [part for chat_id, part in sent if chat_id == target.chat_id] == [0, 1, 2, 3]
    assert limits._in_order == {}  # the locks are the thing that must not pile up
