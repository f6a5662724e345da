"""How many messages `message_send` may send: at most `tools.messageSendsPerTurn` in one turn (a chat's
or a scheduled task's run) and `tools.messageSendsPerChatPerHour` into any one chat in the last hour
(docs/decisions/389-message-send-caps.md, 418-durable-send-counts.md).

A model told by a web page it summarised to "send this to web:main" forty times an answer for ten rounds
wrote 320 messages (2.5 million characters) into another chat from one message; these caps end that
after a few, with words the model can read: the cap, when it frees up, that the person can raise it.

The turn's count lives in the turn's `ToolContext.extras` (one dict per turn, rounds included), a
`TurnSends` that runs spawned by the turn (`subagent_spawn`) share: five spawned runs of one turn send
no more than the turn alone could (adversary17, stop 43). It is taken without yielding, so the calls of
one answer, which run concurrently, each see the others'. The hour's lives in the store (`sends`,
`SendRepository`): each send takes its place there in one atomic step, so an engine restart forgets
nothing and the calls of one answer, other chats' turns and other engines on a shared store each count
the others' (decision 418). A send that is refused or reaches nobody gives both places back; one whose
delivery raised keeps them (it may be recorded, to be delivered later). Sends to
one chat take their hour's place and go one at a time, in the order the calls came (the store may
answer two reservations in either order).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from klaw.store.records import ChatRef
from klaw.store.send_protocol import SEND_WINDOW, SendRepository
from klaw.tools.calls import ToolRefusal
from klaw.tools.schema import ToolContext

TURN_KEY = "message_sends"  # ToolContext.extras: this turn's `TurnSends`


class TurnSends:
    """How many messages a turn (and the runs it spawned) sent: one object, shared by reference."""

    def __init__(self) -> None:
        self.count = 0


class Place:
    """A send's places in its turn and hour, while it is being sent; `reached_nobody` gives them back
    when the block ends."""

    def __init__(self) -> None:
        self.reached = True

    def reached_nobody(self) -> None:
        self.reached = False


class SendLimits:
    """The two caps; the hour's sends per target chat are `places`' (the store's)."""

    def __init__(self, per_turn: int, per_chat_per_hour: int, places: SendRepository) -> None:
        self.per_turn = per_turn
        self.per_chat_per_hour = per_chat_per_hour
        self._places = places
        self._in_order: dict[ChatRef, _Queue] = {}

    @asynccontextmanager
    async def reserve(self, context: ToolContext, chat: ChatRef) -> AsyncIterator[Place]:
        """Count one send to `chat` in this turn and hour for the block (which sends it), or raise
        `ToolRefusal` saying which cap it passes and when it frees up. Both places are given back when
        the block calls `reached_nobody`; a block that raises keeps them (its message may be recorded and
        delivered later: whether it reached the chat is not known). The turn's is taken at once, before anything is
        awaited; the hour's, and the block, one send to `chat` at a time in the order the calls came, so
        one answer's messages arrive in the order asked whichever the store answered first."""
        turn = context.extras.setdefault(TURN_KEY, TurnSends())
        sent_in_turn = turn.count
        if sent_in_turn >= self.per_turn:
            raise ToolRefusal(
                f"not sent: message_send sends at most {self.per_turn} message(s) per turn"
                f" (tools.messageSendsPerTurn), and this turn has sent {sent_in_turn}. The next turn may send"
                " again; put the rest into one message or into your answer here. The person can raise the cap"
                " in engine.yaml (then restart klaw)."
            )
        turn.count += 1  # before anything is awaited, so this answer's other calls count this one
        kept = False
        try:
            async with self._one_at_a_time(chat):
                now = _now(context)
                found = await self._places.reserve(chat, now, self.per_chat_per_hour)
                if found.place is None:
                    frees = (found.oldest or now) + SEND_WINDOW
                    minutes = max(1, math.ceil((frees - now).total_seconds() / 60))
                    raise ToolRefusal(
                        f"not sent: {chat} has had {found.in_hour} message(s) from message_send in the last"
                        f" hour, the most tools.messageSendsPerChatPerHour allows; the next may go in {minutes}"
                        f" minute(s) (at {frees:%H:%M} UTC): do not try again before then. The person can raise"
                        " the cap in engine.yaml (then restart klaw)."
                    )
                place = Place()
                try:
                    yield place
                except BaseException:
                    # Whether it reached the chat is not known: the engine records a message before it
                    # delivers it, so a delivery that raised left it recorded, to be offered again at the
                    # next start. It keeps its places (adversary21: a channel that raised after showing
                    # each message let nine through caps of 3 a turn and 2 an hour), erring toward fewer.
                    kept = True
                    raise
                if not place.reached:
                    await self._places.give_back(found.place)
                kept = place.reached
        finally:
            if not kept:
                turn.count -= 1

    @asynccontextmanager
    async def _one_at_a_time(self, chat: ChatRef) -> AsyncIterator[None]:
        """The block runs alone among `chat`'s sends, after those that asked before it (asyncio's lock
        wakes its waiters in order); the chat's lock is dropped once nobody holds or waits for it, so an
        engine that sent to many chats keeps none of their locks."""
        queue = self._in_order.setdefault(chat, _Queue())
        queue.users += 1
        try:
            async with queue.lock:
                yield
        finally:
            queue.users -= 1
            if queue.users == 0:
                del self._in_order[chat]


class _Queue:
    """One target chat's sends in their order: the lock and how many hold or wait for it."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


def _now(context: ToolContext) -> datetime:
    clock = context.extras.get("clock")  # the engine's time when it gives it (tests move it)
    now = clock.now() if clock is not None else datetime.now(UTC)
    return now.astimezone(UTC)
