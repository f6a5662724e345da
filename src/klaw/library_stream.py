"""`agent.stream(chat, text)`: a reply's text while the model writes it, for a program that shows it as it comes.

The engine already streams a turn's text to the web page and to `GET /api/events` (`Delivery.delta_sink`,
in batches: text_batches.py); a program had only `ask`, the whole reply at the turn's end (newcomer17).
`ReplyStream` is what simonw/llm's async `Response` is: iterate it for the pieces (`async for piece in
agent.stream(chat, text)`), then `await stream.text()` for the reply as stored. It is an `ask` underneath
(the same message, turn, errors and cancellation), whose waiting entry also takes the pieces: the turn's
model call is streamed only while such a reader waits for it, so `ask` keeps its one whole call.
Decision 455.

As llm's `Response` does, it keeps its pieces: `text()` alone runs the turn to its end, and a loop after it
(or a second loop) gives the pieces again, then ends or raises as the first did (`await stream.text()` before
the loop raised "read once"). Each piece says which model call of its turn wrote it (`ReplyPiece.turn_round`,
as `AgentInfo.turn_round` does for a `FunctionModel`): a sentence written before a tool call is streamed too,
while the stored reply is the last round's answer, and a program could not tell them apart. Decision 460.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager

from klaw.engine.delivery import TextSink
from klaw.library_arguments import InvalidArgument
from klaw.llm.call_purpose import current_round


class ReplyPiece(str):
    """A piece of a streamed reply: the text, and `turn_round`, which model call of the turn wrote it (1, then
    one more after each round of tool calls). Pieces of a round before the last are what the model said
    before calling tools (often "Let me check."); the stored reply, `await stream.text()`, is the last
    round's answer. A reply no model wrote (a slash command's) is one piece of round 1."""

    __slots__ = ("turn_round",)
    turn_round: int

    def __new__(cls, text: str, turn_round: int) -> ReplyPiece:
        piece = super().__new__(cls, text)
        piece.turn_round = turn_round
        return piece


Reader = Callable[[ReplyPiece], None]  # given each piece, at once


class ReplyStream:
    """The reply to one message, piece by piece: `async for piece in stream` gives the text as the model
    writes it (every round of its turn, each piece a `ReplyPiece` saying its round, in the batches the web
    page gets; a reply no model wrote, a slash command's, as one piece), then raises what `ask` would
    (`TurnFailed`, `MessageRefused`…); `await stream.text()` is the stored reply, as `ask` returns it. The
    message is sent when either starts. The pieces are kept: `text()` first, then a loop (or a second loop)
    gives them again. `await stream.text()` right after leaving a loop early (`break`) gives the whole reply
    (the turn runs on); a stream left with nothing else waiting stops its waiting, as cancelling an `ask`
    does: the turn runs to its end, its reply goes to `on_message` (decision 249) and a later `text()` raises
    `InvalidArgument` saying so (decision 468)."""

    def __init__(self, ask: Callable[[Reader], Awaitable[str]]) -> None:
        self._ask = ask
        self._pieces: list[ReplyPiece] = []
        self._grew = asyncio.Event()  # set on each piece and at the end
        self._task: asyncio.Task[str] | None = None
        self._holding = 0  # the loops and text() calls waiting for the turn's end
        self._stopped = False  # every one left before the end: the waiting stopped, the reply goes to on_message

    def __aiter__(self) -> AsyncIterator[ReplyPiece]:
        return self._read()

    async def text(self) -> str:
        """The reply as stored (what `ask` returns), once the turn has ended; raises what `ask` raises. Right
        after a loop left early (`break`) it still gives the whole reply: the turn runs on (decision 468)."""
        if self._stopped:
            raise self._left_early()
        task = self._hold()
        try:
            return await asyncio.shield(task)  # a loop's close cancels the waiting only when nothing else waits
        finally:
            self._release(task)

    def _hold(self) -> asyncio.Task[str]:
        if self._task is None:
            self._task = asyncio.ensure_future(self._ask(self._took))
            self._task.add_done_callback(lambda _: self._grew.set())
        self._holding += 1
        return self._task

    def _release(self, task: asyncio.Task[str]) -> None:
        """One loop or text() stopped waiting. The last to leave before the turn's end stops the waiting, as
        cancelling an `ask` does: the turn runs to its end and its reply goes to `on_message`. `break` closes
        the loop's generator a moment later (the event loop's asyncgen finalizer), which cancelled the ask
        under a text() awaited right after the loop: it raised a bare CancelledError (adversary26)."""
        self._holding -= 1
        if self._holding == 0 and not task.done():
            self._stopped = True
            task.cancel()

    @staticmethod
    def _left_early() -> InvalidArgument:
        return InvalidArgument(
            "this stream stopped waiting before the reply's end (its loop was left early, or its text() was"
            " cancelled, with nothing else waiting): the reply goes to on_message (and is in history());"
            " await text() right after leaving the loop, or read the loop to its end, to have it here"
        )

    def _took(self, piece: ReplyPiece) -> None:
        self._pieces.append(piece)
        self._grew.set()

    async def _read(self) -> AsyncIterator[ReplyPiece]:
        task, shown = self._hold(), 0
        try:
            while shown < len(self._pieces) or not task.done():
                if shown == len(self._pieces):
                    self._grew.clear()
                    await self._grew.wait()
                    continue
                shown += 1
                yield self._pieces[shown - 1]
            if self._stopped:  # a loop after an earlier one left early: the pieces it had, then why no more
                raise self._left_early()
            reply = task.result()  # raises what ask raised
            if not self._pieces and reply:
                yield ReplyPiece(reply, 1)
        finally:
            self._release(task)


class StreamReaders:
    """Which waiting message has a reader for the pieces of the turn that answers it."""

    def __init__(self) -> None:
        self._readers: dict[str, Reader] = {}

    @contextmanager
    def reading(self, message_id: str, reader: Reader | None) -> Iterator[None]:
        if reader is not None:
            self._readers[message_id] = reader
        try:
            yield
        finally:
            self._readers.pop(message_id, None)

    def pick(self, waiting: Sequence[str], reply_to: str | None) -> TextSink | None:
        """The sink of a turn answering `reply_to` and the waiting messages before it (a turn answers
        a chat's messages up to its last): their readers, or None (no reader: the model call is whole)."""
        if reply_to not in waiting:
            return None
        readers = [self._readers[m] for m in waiting[: waiting.index(reply_to) + 1] if m in self._readers]
        if not readers:
            return None

        async def send(text: str) -> None:
            piece = ReplyPiece(text, current_round())  # the tool loop's round, set around the model call
            for reader in readers:
                reader(piece)

        return send
