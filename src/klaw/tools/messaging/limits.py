"""How many messages `message_send` may send: at most `tools.messageSendsPerTurn` in one turn (a chat's
or a scheduled task's run) and `tools.messageSendsPerChatPerHour` into any one chat in the last hour
(docs/decisions/389-message-send-caps.md).

A model told by a web page it summarised to "send this to web:main" forty times an answer for ten rounds
wrote 320 messages (2.5 million characters) into another chat from one message; these caps end that
after a few, with words the model can read: the cap, when it frees up, that the person can raise it.

The turn's count lives in the turn's `ToolContext.extras` (one dict per turn, rounds included), a
`TurnSends` that runs spawned by the turn (`subagent_spawn`) share: five spawned runs of one turn send
no more than the turn alone could (adversary17, stop 43). The hour's lives in this object, one per
engine, in memory (an engine restart forgets it: it bounds a flood, it is no quota). A send that is
refused or reaches nobody gives its place back. Checked and counted without yielding, so the calls of
one answer, which run concurrently, each see the others'.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from klaw.store.records import ChatRef
from klaw.tools.calls import ToolRefusal
from klaw.tools.schema import ToolContext

HOUR = timedelta(hours=1)
TURN_KEY = "message_sends"  # ToolContext.extras: this turn's `TurnSends`


class TurnSends:
    """How many messages a turn (and the runs it spawned) sent: one object, shared by reference."""

    def __init__(self) -> None:
        self.count = 0


class SendLimits:
    """The two caps, and the hour's sends per target chat."""

    def __init__(self, per_turn: int, per_chat_per_hour: int) -> None:
        self.per_turn = per_turn
        self.per_chat_per_hour = per_chat_per_hour
        self._sent: dict[ChatRef, deque[datetime]] = {}

    def reserve(self, context: ToolContext, chat: ChatRef) -> Callable[[], None]:
        """Count one send to `chat` in this turn and hour, or raise `ToolRefusal` saying which cap it
        passes and when it frees up. Returns the function that gives the place back (nothing sent)."""
        turn = context.extras.setdefault(TURN_KEY, TurnSends())
        sent_in_turn = turn.count
        if sent_in_turn >= self.per_turn:
            raise ToolRefusal(
                f"not sent: message_send sends at most {self.per_turn} message(s) per turn"
                f" (tools.messageSendsPerTurn), and this turn has sent {sent_in_turn}. The next turn may send"
                " again; put the rest into one message or into your answer here. The person can raise the cap"
                " in engine.yaml."
            )
        now = _now(context)
        times = self._sent.setdefault(chat, deque())
        while times and times[0] <= now - HOUR:
            times.popleft()
        if len(times) >= self.per_chat_per_hour:
            frees = times[0] + HOUR
            minutes = max(1, math.ceil((frees - now).total_seconds() / 60))
            raise ToolRefusal(
                f"not sent: {chat} has had {len(times)} message(s) from message_send in the last hour, the most"
                f" tools.messageSendsPerChatPerHour allows; the next may go in {minutes} minute(s)"
                f" (at {frees:%H:%M} UTC): do not try again before then. The person can raise the cap in"
                " engine.yaml."
            )
        turn.count += 1
        times.append(now)

        def give_back() -> None:
            turn.count -= 1
            if now in times:
                times.remove(now)

        return give_back


def _now(context: ToolContext) -> datetime:
    clock = context.extras.get("clock")  # the engine's time when it gives it (tests move it)
    now = clock.now() if clock is not None else datetime.now(UTC)
    return now.astimezone(UTC)
