"""A streamed answer's text pieces sent to a channel in batches, beside the model's stream, not in its way.

Each piece a model streams (a few characters) was awaited on its way through the socket and the gateway to
the channel: a reply of 1.5 MB was ~190,000 delta frames, the turn waited on each, and its reply came 126 s
later, after a web API caller had stopped waiting (decision 443). Now a piece is only noted; one sender
task writes the first piece at once, then what has gathered since its last write, at most every
`BATCH_SECONDS` (a person sees no difference at 20 writes a second) and each at most `MAX_BATCH_CHARS`.
`finish` sends the rest without pausing and waits until all is sent, so the reply comes after its pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

BATCH_SECONDS = 0.05
"""The pause after a write, while the next pieces gather."""
MAX_BATCH_CHARS = 65_536
"""Characters in one batch: far below a frame's 1 MiB, however the text escapes."""


class TextBatches:
    """`add` each piece as it comes (hardly waits); `finish` once the answer is whole; `cancel` when not."""

    def __init__(self, send: Callable[[str], Awaitable[None]]) -> None:
        self._send = send
        self._pending: list[str] = []
        self._sender: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()

    async def add(self, text: str) -> None:
        """Note `text`; the first piece of a batch lets the sender start at once (a stream read from a
        buffer gives the loop no turn of its own), the others return without waiting."""
        self._pending.append(text)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_pending())
            await asyncio.sleep(0)

    async def finish(self) -> None:
        self._finished.set()
        while self._sender is not None and not self._sender.done():
            await asyncio.shield(self._sender)

    def cancel(self) -> None:
        if self._sender is not None:
            self._sender.cancel()

    async def _send_pending(self) -> None:
        while self._pending:
            text = "".join(self._pending)
            batch, rest = text[:MAX_BATCH_CHARS], text[MAX_BATCH_CHARS:]
            self._pending[:] = [rest] if rest else []
            with contextlib.suppress(Exception):  # the sink logs its own failures; a lost piece is not fatal
                await self._send(batch)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finished.wait(), BATCH_SECONDS)
