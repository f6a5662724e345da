"""What `/forget` (or `klaw memory forget` through the socket) stops in a chat (decisions 219, 277): the turn
under way and the messages still waiting for theirs (in their debounce, or for the chat's turn lock), each
batch's exchange closed as failed, and the words each batch is answered with afterwards.

Apart from the processor, which decides when to stop; this says what a stopped batch leaves behind.
Every message accepted before the `/forget` belongs to an exchange by the time its target is resolved,
so `/forget last` means the exchange of the last message the person sent, even when its turn had not
yet opened that exchange (still in debounce, or the few milliseconds before the opening record), and
a stopped message is answered once, at once, never again at the next start (a failed exchange counts
as answered). The answer says whether the forget erased the message or only stopped its turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from klaw.engine.chat_leases import ChatLeases
from klaw.engine.chat_reply import ChatReply
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.turn_runner import TurnStopped
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, StoredMessage

log = logging.getLogger(__name__)

# True whichever asked for the forget: `/forget` in the chat, or `klaw memory forget` through the socket.
ERASED = "Stopped before answering: this conversation turn was forgotten (erased)."
KEPT = (
    "Stopped before answering: something in this chat was forgotten while this message waited for its answer;"
    " send it again for one."
)
# A turn the person cancelled (Ctrl-C in `klaw chat`): nothing was forgotten, the message stays in the chat.
CANCELLED = "Cancelled: this turn was stopped before its answer (Ctrl-C); your message is kept. Send it again for one."


@dataclass(eq=False)
class LockWait:
    """A batch whose debounce ended, waiting for its chat's turn lock; `stopped` once `turn_stopped` took it
    (its exchange is then closed there and its turn never runs: the model never sees it, decision 277)."""

    messages: list[StoredMessage]
    stopped: bool = False


@dataclass(eq=False)
class Batch:
    """A batch's turn: its messages, those it answers (on a shared store, less those another engine
    answered) and its sink once made: what a stop closes."""

    pending: list[StoredMessage]
    answering: list[StoredMessage] = field(init=False)
    sink: ChatReply | None = None

    def __post_init__(self) -> None:
        self.answering = self.pending


@dataclass(frozen=True)
class StoppedBatch:
    """Messages whose turn was stopped; `answers` their ids, oldest first."""

    answers: tuple[str, ...]


@dataclass(eq=False)
class Stopped:
    """What `turn_stopped` stopped in a chat; true if anything. The `/forget` sets `erased` to the ids of
    the records it erased, so that each batch is told whether it went."""

    batches: list[StoppedBatch]
    erased: frozenset[str] = field(default=frozenset())
    cancelled: bool = False  # the person cancelled the turn (Ctrl-C), nothing was forgotten

    def __bool__(self) -> bool:
        return bool(self.batches)


async def close_stopped(sink: ChatReply) -> StoppedBatch:
    """Close the stopped batch's exchange (opening it first if need be); a failure to write is logged by
    type and the batch is still answered (its messages are then answered again at the next start)."""
    try:
        await sink.stopped()
    except Exception as exc:
        log.error("closing the stopped turn of chat %s failed: %s", sink.chat, type(exc).__name__)
    return StoppedBatch(sink.answers)


async def tell_stopped(delivery: Delivery, chat: ChatRef, stopped: Stopped) -> None:
    """Answer each stopped batch: erased, or stopped only (then it is the person's to send again)."""
    for batch in stopped.batches:
        text = ERASED if batch.answers[-1] in stopped.erased else CANCELLED if stopped.cancelled else KEPT
        try:
            await delivery.deliver(Outbound(chat, text, batch.answers[-1], "error", answers=batch.answers))
        except Exception as exc:
            log.error("telling chat %s its turn was stopped failed: %s", chat, type(exc).__name__)


def forget_checkpoint(
    leases: ChatLeases | None, store: Storage, chat: ChatRef, batch: Sequence[StoredMessage], reply_to: str
) -> Callable[[], Awaitable[None]] | None:
    """A turn's `Turn.checkpoint` on a store several engines share (decision 286): a forget stored in the
    chat after the batch's first message, by any engine, stops the turn before its next model call or its
    reply, told as this engine's `/forget` tells it (erased, when the message `reply_to` is gone): another
    engine's `/forget` cannot cancel this turn, so the turn asks the store both share."""
    if leases is None:
        return None  # one engine: its `/forget` cancels the turn itself (`MessageProcessor.turn_stopped`)
    since = min(message.rowid for message in batch)

    async def checkpoint() -> None:
        if await leases.forgotten_after(chat, since):
            erased = await store.messages.get(reply_to) is None
            raise TurnStopped(ERASED if erased else KEPT, erased=erased)

    return checkpoint
