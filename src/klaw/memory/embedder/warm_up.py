"""The local embedder's one-time load, paid at engine start instead of inside a turn's query deadline.

A local model (MiniLM, e5) loads on its first `embed`, on its own thread: the weights' sha256, the
weights, the tokenizer, then a first inference. Measured with `echo … | klaw chat` on a home with a
past conversation, at a load of 8 on 2 CPUs: that first call took 1.8-5.6 s (the calls after it
0.03 s), and it was the first turn's query embedding that paid it, against `queryTimeoutSeconds`
(2 s): half the starts logged "past-conversation retrieval failed (EmbedderError)" and the person saw
"(klaw logged a warning …)" on a normal first message, recalled by full text alone.

So the engine starts the load as soon as the embedder exists (`WarmUp.start`), on the model's thread
(never the event loop), while the rest of start-up runs; and a query asked before it is done waits for
it (at most `WAIT_LIMIT_SECONDS`) before its own deadline starts (`QueryMemo`): the deadline is for a
query that hangs, not for a load paid once. An embedder warms up when it has an async `warm_up()`
(MiniLM and e5 do; the remote and fake ones have nothing to load). Decision 260.

A load that fails (no room for the ONNX cache, damaged weights) is logged, and `status_lines` says it in
`/status`: in `klaw chat` the log is a file, and recall silently without vectors is worth a line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from klaw.cancellation import cancel_and_wait
from klaw.memory.embedder.protocol import Embedder, EmbedderError
from klaw.start_notes import note

log = logging.getLogger(__name__)

# A load that takes longer than this (a machine far too slow for the model) no longer holds a query
# back: the query's own deadline then decides, as before.
WAIT_LIMIT_SECONDS = 60.0


class WarmUp:
    """The warm-up in flight (or done); `wait` for it, `aclose` before the embedder closes."""

    def __init__(self, model_id: str = "") -> None:
        self._task: asyncio.Task[None] | None = None
        self._model_id = model_id
        self._failure: str | None = None  # why the load failed, in words that never quote content
        self._deferred: Callable[[], Awaitable[None]] | None = None  # a load not begun until asked for

    @classmethod
    def start(cls, embedder: Embedder, *, now: bool = True) -> WarmUp:
        """Start `embedder.warm_up()` in the background when it has one; else nothing to wait for.
        `now=False` (an engine started for one piped message): the load begins when a query first waits
        for it (`wait`), still uncounted by the query's deadline; a turn that searches nothing never pays
        it (decision 499)."""
        warm = cls(embedder.model_id)
        warm_up: Callable[[], Awaitable[None]] | None = getattr(embedder, "warm_up", None)
        if warm_up is not None:
            warm._deferred = warm_up
            if now:
                note(f"loading the embedder {embedder.model_id} (in the background: a search waits for it)")
                warm.begin()
        return warm

    def begin(self) -> None:
        """Begin a deferred load now (at once if it has begun, or there is nothing to load)."""
        warm_up, self._deferred = self._deferred, None
        if warm_up is not None and self._task is None:
            self._task = asyncio.create_task(self._warm(warm_up), name="embedder-warm-up")

    def status_lines(self) -> list[str]:
        """`/status`'s line when the load at start failed (the embedding queue's line says whether the
        embeddings made since then failed too: each one tries the load again)."""
        if self._failure is None:
            return []
        return [f"Embedder: {self._model_id} could not load at start: {self._failure}"]

    @property
    def done(self) -> bool:
        """Whether nothing is left to wait for: loaded, failed, or nothing to load (a deferred load not
        begun is not done: `wait` begins it)."""
        return self._deferred is None and (self._task is None or self._task.done())

    async def wait(self, limit_seconds: float = WAIT_LIMIT_SECONDS) -> None:
        """Until the warm-up has ended (loaded or failed) or `limit_seconds` passed, begun first when it was
        deferred; never raises its error."""
        self.begin()
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task}, timeout=limit_seconds)

    async def aclose(self) -> None:
        self._deferred = None  # nothing begins once the embedder closes
        task = self._task
        if task is not None and not task.done():
            await cancel_and_wait(task)  # a cancel of the caller meanwhile is not swallowed (decision 428)

    async def _warm(self, warm_up: Callable[[], Awaitable[None]]) -> None:
        try:
            await warm_up()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the first real call fails the same way and says so where it is used
            log.warning("the embedder %s could not load: %s", self._model_id, exc)
            # klaw's own embedder errors name paths and fixes, never content; anything else by its class
            self._failure = str(exc) if isinstance(exc, EmbedderError) and str(exc) else type(exc).__name__
        else:
            log.debug("embedder %s loaded", self._model_id)
