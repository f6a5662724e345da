"""What the engine socket lets its connections hold: how many may be open, and how many bytes of
frames whose newline has not come yet, across all of them.

Apart from the server because it is bookkeeping, not a connection's life. Each connection may hold
one frame of up to `MAX_FRAME_BYTES` (1 MiB) while it arrives, so with no bound 200 connections that
each sent 1 MiB without a newline held 200 MiB of the engine's memory for as long as they stayed
open (measured: 371 → 544 MB), and any number could be opened. Now at most `MAX_CONNECTIONS` are
open (one more is told why in an `error` frame and closed at once), and unfinished frames hold at
most `UNFINISHED_BYTES_BUDGET` together: past it, the connections whose unfinished frame is the
oldest are told and closed. A connection refused for the cap is not closed at once: its own first
frame (a gateway's hello, a command's query), arriving on a socket already closed, reset the
connection and the peer lost the sentence (a gateway said "lost the engine", `klaw tools`
"ConnectionResetError"); so the engine ends its side after the sentence and reads and drops what
the peer sends until it closes, for at most `REFUSED_LINGER_SECONDS`, `MAX_LINGERING` at once (more
are closed at once, as before). A gateway writes a frame in one go, so its frame is never the oldest
for long: the stalled ones go first and the others are never made to wait. The other way, what the engine
sends a connection and it has not read is bounded too (`MAX_UNREAD_BYTES`, gateway_connection.py).
"""

from __future__ import annotations

from typing import Generic, TypeVar

MAX_CONNECTIONS = 256
"""Connections open at once (gateways, `klaw` commands, benchmarks); the same cap as the web page's."""
UNFINISHED_BYTES_BUDGET = 16 << 20
"""Bytes of frames still waiting for their newline, summed over every connection (16 frames of the largest size)."""

MAX_UNREAD_BYTES = 16 << 20
"""Bytes of frames waiting unread for one connection before it is dropped as fallen behind (decision 535): a
whole reply of the largest size (2,000,000 characters, up to ~12 MiB as frames) fits, so a reading client never is."""

REFUSED_LINGER_SECONDS = 2.0
"""How long a refused connection is read from (and what it sends dropped) so it can read the refusal."""
MAX_LINGERING = 32
"""Refused connections read from at once; past it a refused one is closed at once."""

Peer = TypeVar("Peer")


def too_many_connections(cap: int) -> str:
    """The answer to a connection past the cap: what is wrong and what to do."""
    return f"the engine already has {cap} connections open, its limit; close some (gateways, klaw commands) and retry"


def stalled_frame(held: int) -> str:
    """The answer to a connection closed for holding the oldest unfinished frame."""
    return (
        f"this connection's frame stayed unfinished ({held} bytes without a newline) while the engine's room for"
        " unfinished frames ran out; end every frame with a newline, then connect again"
    )


def fell_behind(unread: int, limit: int) -> str:
    """The last frame of a connection dropped for not reading what the engine sends it."""
    return (
        f"this connection fell behind: {unread} bytes of frames would wait unread, over the {limit} the engine keeps"
        " for one connection, so it was closed rather than let it hold up the others; read frames as they come, then"
        " connect again"
    )


class UnfinishedFrames(Generic[Peer]):
    """Bytes each peer holds of its unfinished frame, oldest first; says which peers to drop past the budget."""

    def __init__(self, budget: int = UNFINISHED_BYTES_BUDGET) -> None:
        self._budget = budget
        self._held: dict[Peer, int] = {}  # insertion order is the order the unfinished frames began
        self._total = 0

    @property
    def total(self) -> int:
        return self._total

    def hold(self, peer: Peer, size: int) -> list[tuple[Peer, int]]:
        """`peer` now holds `size` bytes of an unfinished frame (0: none); the peers to drop, with what they
        held, oldest first, so that the rest fits the budget (possibly `peer` itself)."""
        self._total -= self._held.get(peer, 0)
        if size <= 0:
            self._held.pop(peer, None)
            return []
        self._held.setdefault(peer, 0)  # a frame already under way keeps its age
        self._held[peer] = size
        self._total += size
        dropped = []
        while self._total > self._budget:
            oldest = next(iter(self._held))
            dropped.append((oldest, self._held.pop(oldest)))
            self._total -= dropped[-1][1]
        return dropped
