"""`TurnGate`: a chat's background log writes (its summaries) wait for the end of its turn in flight.

A summary record is appended while its chat's log lock is held: the line, its fsync and its row
(decision 211). Written while a turn of the same chat runs, it takes that lock just when the turn
may need it (its reply and close, its exchange's opening), and the person waits behind background
work: in `klaw bench turn` 46 of 200 replies did, +1.2 ms on the mean and most of the p95
(decision 407). So the summary's write waits for the turn instead (decision 414): the turn marks
itself here for its whole length (`turn`), the summary waits before it takes any lock
(`between_turns`). The wait is bounded (`WAIT_SECONDS`): one worker writes every chat's summaries,
and a chat whose turns follow one another without a pause must not stall them. Nothing about what
is durable when changes: the summary's line and row are written as before, only later.

The embedding queue asks the same of every chat at once (`quiet`, decision 426): its claims, vector
writes and embedder calls go to the threads and the GIL the turns need, so it starts a pass once no
turn is in flight anywhere (or after `QUIET_WAIT_SECONDS`, and then drains what is due, so a run of
busy chats delays vectors by about that much, never starves them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from klaw.store.records import ChatRef

# At most this long a summary waits for its chat's turn; then it is written anyway (the turn may wait).
WAIT_SECONDS = 0.5
# At most this long the embedding queue waits for a moment without turns before a pass (`quiet`).
QUIET_WAIT_SECONDS = 1.0


class TurnGate:
    def __init__(self) -> None:
        self._turns: dict[ChatRef, tuple[int, asyncio.Event]] = {}  # chats with a turn in flight
        # Turns (their events) a summary already waited out: the next summaries of the batch do not wait
        # again, or a turn held open (an approval) would stall the one worker `WAIT_SECONDS` a summary.
        self._waited_out: set[asyncio.Event] = set()
        self._none_in_flight = asyncio.Event()  # set while `_turns` is empty
        self._none_in_flight.set()

    @contextlib.contextmanager
    def turn(self, chat: ChatRef) -> Iterator[None]:
        """Mark a turn of `chat` in flight until the block ends, however it ends (a cancelled turn too)."""
        count, ended = self._turns.get(chat) or (0, asyncio.Event())
        self._turns[chat] = (count + 1, ended)
        self._none_in_flight.clear()
        try:
            yield
        finally:
            count, ended = self._turns[chat]
            if count > 1:
                self._turns[chat] = (count - 1, ended)
            else:
                del self._turns[chat]
                self._waited_out.discard(ended)
                ended.set()
                if not self._turns:
                    self._none_in_flight.set()

    async def between_turns(self, chat: ChatRef, bound: float | None = None) -> None:
        """Return when no turn of `chat` is in flight, or after `bound` seconds (None: `WAIT_SECONDS`); at
        once for a turn a summary already waited out."""
        turn = self._turns.get(chat)
        if turn is None or turn[1] in self._waited_out:
            return
        try:
            async with asyncio.timeout(WAIT_SECONDS if bound is None else bound):  # not wait_for: decision 428
                await turn[1].wait()
        except TimeoutError:
            if not turn[1].is_set():
                self._waited_out.add(turn[1])

    async def quiet(self, bound: float = QUIET_WAIT_SECONDS) -> bool:
        """Return True when no turn of any chat is in flight, False when `bound` seconds passed first."""
        if self._none_in_flight.is_set():
            return True
        try:
            async with asyncio.timeout(bound):
                await self._none_in_flight.wait()
        except TimeoutError:
            return self._none_in_flight.is_set()
        return True
