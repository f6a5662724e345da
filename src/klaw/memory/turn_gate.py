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

A turn marks itself only once it holds its chat's lock, after its message was accepted and queued: a pass
woken by that message could run in between and embed the turn's own question beside its start (decision
494). So `quiet` also waits for the person's messages on their way to a turn (decision 497): one being
accepted (`accepting`, until the processor queues it) and one queued (`queued`, the processor's own set of
rowids waiting for, or in, their turn, whose every exit path already discards them). Sets and a context
manager, not counters: a message released twice, or never added, cannot leave a hold behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from klaw.store.records import ChatRef

# At most this long a summary waits for its chat's turn; then it is written anyway (the turn may wait).
WAIT_SECONDS = 0.5
# At most this long the embedding queue waits for a moment without turns before a pass (`quiet`).
QUIET_WAIT_SECONDS = 1.0


class QueuedMessages:
    """The rowids of messages queued for a turn, until it ends (the processor's `_queued`): while one is
    here, `TurnGate.quiet` waits. Only what a set does, each change telling the gate."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._rowids: set[int] = set()
        self._changed = changed

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._rowids

    def __len__(self) -> int:
        return len(self._rowids)

    def add(self, rowid: int) -> None:
        self._rowids.add(rowid)
        self._changed()

    def discard(self, rowid: int) -> None:
        self._rowids.discard(rowid)
        self._changed()

    def clear(self) -> None:
        self._rowids.clear()
        self._changed()


class TurnGate:
    def __init__(self) -> None:
        self._turns: dict[ChatRef, tuple[int, asyncio.Event]] = {}  # chats with a turn in flight
        # Turns (their events) a summary already waited out: the next summaries of the batch do not wait
        # again, or a turn held open (an approval) would stall the one worker `WAIT_SECONDS` a summary.
        self._waited_out: set[asyncio.Event] = set()
        self._accepting: set[object] = set()  # a token for each person's message being accepted
        self.queued = QueuedMessages(self._changed)
        self._none_in_flight = asyncio.Event()  # set while no turn, no accept and no queued message
        self._none_in_flight.set()

    def _changed(self) -> None:
        if self._turns or self._accepting or self.queued:
            self._none_in_flight.clear()
        else:
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
                self._changed()

    @contextlib.contextmanager
    def accepting(self) -> Iterator[None]:
        """Hold `quiet` while a person's message is accepted (its log line, its row and job, the pass woken):
        the processor queues it before the block ends (`queued`), or it was refused or a replay."""
        token = object()
        self._accepting.add(token)
        self._none_in_flight.clear()
        try:
            yield
        finally:
            self._accepting.discard(token)
            self._changed()

    @property
    def holding(self) -> bool:
        """Whether `quiet` would wait now: a turn in flight, a message being accepted or queued."""
        return not self._none_in_flight.is_set()

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

    async def quiet(self, bound: float | None = None) -> bool:
        """Return True when no turn of any chat is in flight and no person's message is on its way to one,
        False when `bound` seconds (None: `QUIET_WAIT_SECONDS`, read at the call) passed first."""
        if self._none_in_flight.is_set():
            return True
        try:
            async with asyncio.timeout(QUIET_WAIT_SECONDS if bound is None else bound):
                await self._none_in_flight.wait()
        except TimeoutError:
            return self._none_in_flight.is_set()
        return True
