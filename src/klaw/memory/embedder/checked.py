"""A program's own embedder (`Klaw(embedder=...)`), its vectors checked against the `Embedder` contract.

klaw's own embedders return what the contract says: a float32 numpy array of shape `(len(texts), dim)`,
each row L2-normalised. A program's may not: newcomer24's returned `list[list[float]]`, and it failed only
in the background, deep in the store (`/status`: "the last try failed: AttributeError"), while search fell
back to words without a word why. `Checked` wraps a program's embedder and looks at every answer before
klaw uses it, raising `EmbedderError` naming the embedder, what the contract asks and what it got;
`probe` asks it once at start (a text of one word), so a wrong answer stops `Klaw.start` with those words
rather than being found by the first message's vector (decision 538). The check is a type, a shape and a
dtype comparison and one norm per row: nothing next to an embedding.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from klaw.memory.embedder.protocol import Embedder, EmbedderError, Vectors, WrappedEmbedder


class WrongVectors(EmbedderError):
    """A program's embedder answered something other than the contract's vectors: what it got, and the fix."""


log = logging.getLogger(__name__)

PROBE_TEXT = "klaw"
PROBE_SECONDS = 60.0
"""At most this long for the probe at start: an embedder slower than that (a model loading) is not waited
for; its first real answer is checked all the same."""
NORM_TOLERANCE = 1e-3


def vectors_problem(vectors: Any, count: int, dim: int) -> tuple[str, str] | None:
    """What is wrong with `vectors` as the answer for `count` texts of a `dim`-sized embedder, and the fix
    when there is a short one; None when nothing is."""
    import numpy as np

    if not isinstance(vectors, np.ndarray):
        fix = "np.asarray(rows, dtype=np.float32) makes one" if isinstance(vectors, list | tuple) else ""
        return f"returned {type(vectors).__name__}", fix
    if vectors.shape != (count, dim):
        return f"returned an array of shape {vectors.shape} for {count} text(s)", ""
    if vectors.dtype != np.float32:
        return f"returned dtype {vectors.dtype}", ".astype(np.float32) converts it"
    if not np.isfinite(vectors).all():
        return "returned NaN or infinite values", ""
    norms = np.linalg.norm(vectors, axis=1)
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        return (
            f"returned a row of length {float(norms[off][0]):.3g}",
            "rows / np.linalg.norm(rows, axis=1, keepdims=True) normalises them",
        )
    return None


class Checked(WrappedEmbedder):
    """A program's embedder whose every answer is checked before klaw stores or searches with it."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.name = type(inner).__name__
        # its own warm-up (a model to load), which WarmUp looks up by name, stays visible through the wrapper
        self.warm_up: Callable[[], Awaitable[None]] | None = getattr(inner, "warm_up", None)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return self._checked("embed", await self._inner.embed(texts), len(texts))

    def _checked(self, method: str, vectors: Any, count: int) -> Vectors:
        dim = self._inner.dim
        problem = vectors_problem(vectors, count, dim)
        if problem is not None:  # what it got first: /status shows the first 200 characters
            got, fix = problem
            raise WrongVectors(
                f"embedder= {self.name}.{method} {got}: it must return a float32 numpy array of shape (n, dim) ="
                f" ({count}, {dim}), its rows L2-normalised{f'; {fix}' if fix else ''} (docs/library.md, `embedder`)"
            )
        checked: Vectors = vectors
        return checked


class CheckedQueries(Checked):
    """A program's embedder with a query form of its own (`embed_queries`, as e5's), both forms checked."""

    async def embed_queries(self, texts: Sequence[str]) -> Vectors:
        inner: Any = self._inner
        return self._checked("embed_queries", await inner.embed_queries(texts), len(texts))


def checked(embedder: Embedder) -> Checked:
    """`embedder` behind the check, keeping its query form when it has one."""
    if callable(getattr(embedder, "embed_queries", None)):
        return CheckedQueries(embedder)
    return Checked(embedder)


async def probe(embedder: Embedder | None) -> None:
    """Ask a program's embedder for one vector at start: a wrong answer raises its `EmbedderError` there. An
    embedder that fails otherwise (a server down) or is slow only gets a warning: that can pass, and the
    embedding queue retries; the configured embedders (not `Checked`) are not asked."""
    if not isinstance(embedder, Checked):
        return
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            await embedder.embed([PROBE_TEXT])
            if isinstance(embedder, CheckedQueries):
                await embedder.embed_queries([PROBE_TEXT])
    except WrongVectors:  # the contract broken: nothing it embeds could be used
        raise
    except Exception as exc:
        log.warning(
            "the embedder= %s could not embed at start (%s); vectors wait until it can",
            embedder.name,
            type(exc).__name__,
        )
