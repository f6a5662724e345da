"""A turn's writes fenced by its chat's lease (docs/decisions/200-lease-fencing.md).

An engine that stalls past its lease (a machine suspended, a long pause, the database out of reach)
wakes up in the middle of a turn whose chat another engine may have taken over and answered. Its
remaining writes (the reply, the exchange's close, a saved memory) must then be refused, or the chat
gets two answers. So each lease taken carries a generation (raised at every take), and while a turn
holds it, every append to that chat checks, in the append's own transaction, that the lease row still
names this engine and this generation — locking the row so that a takeover waits for the append to
commit and then reads it. A lease that expired but that no other engine took is still good: nobody
else answers the chat meanwhile, so a slow turn on a loaded machine is not thrown away.

The turn's code does not pass the fence along: it is a context variable set for the block that holds
the lease (`fenced`). Tasks the turn starts inherit it; once the block ends the fence is switched off,
so what they write afterwards is not fenced (it is no longer the turn's write).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from klaw.store.protocol import StorageError
from klaw.store.records import ChatRef


class LeaseLostError(StorageError):
    """The chat's lease this write was fenced by expired or was taken by another engine."""


@dataclass(eq=False)
class LeaseFence:
    """The lease a block holds: its chat, this engine's holder name, the generation it was taken with."""

    chat: ChatRef
    holder: str
    generation: int
    active: bool = True

    def lost(self) -> LeaseLostError:
        return LeaseLostError(
            f"this engine's lease of chat {self.chat} expired (the engine stalled or lost the database) and"
            " another engine took the chat: the turn's writes are refused, that engine answers"
        )


_current: ContextVar[LeaseFence | None] = ContextVar("klaw_lease_fence", default=None)


@contextlib.contextmanager
def fenced(fence: LeaseFence) -> Iterator[None]:
    """Fence the block's writes to `fence.chat` (and those of tasks it starts, until the block ends)."""
    token = _current.set(fence)
    try:
        yield
    finally:
        fence.active = False
        _current.reset(token)


def fence_for(chat: ChatRef) -> LeaseFence | None:
    """The fence a write to `chat` must pass here, if any."""
    fence = _current.get()
    return fence if fence is not None and fence.active and fence.chat == chat else None
