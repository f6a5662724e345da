"""A deterministic, model-free embedder for tests and benchmarks of everything around embeddings.

It is a bag of words with feature hashing: each lowercase word token adds ±1 to one of `dim`
buckets, then the vector is L2-normalised. Texts that share words therefore have a higher cosine
than unrelated texts, which is enough to test retrieval plumbing without loading a model. Texts longer
than `ON_LOOP_CHARS` in all are hashed in a thread, not on the caller's event loop (decision 452).

The bucket and sign come from blake2b, not Python's `hash()`: `hash()` is salted per process
(PYTHONHASHSEED), and vectors written by one process must match queries embedded by another.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from collections.abc import Sequence

from klaw.memory.embedder.protocol import Vectors

_WORD = re.compile(r"\w+")
# Texts without any word token (empty, whitespace, punctuation only) embed as this pseudo-token's
# vector, a fixed unit vector: every row stays unit-length as the protocol promises (a zero row
# would make cosine distance undefined downstream), and all such texts are identical to each other,
# much as a real model maps "" to one fixed vector.
EMPTY_TOKEN = "\x00empty"
ON_LOOP_CHARS = 65_536
"""Texts up to this many characters in all are hashed on the caller's loop (well under a millisecond)."""


class FakeEmbedder:
    """Signed feature hashing of lowercase word tokens; `model_id` is `fake-hash-{dim}`."""

    def __init__(self, dim: int = 384) -> None:
        if dim < 1:
            raise ValueError("dim must be >= 1")
        self._dim = dim

    @property
    def model_id(self) -> str:
        return f"fake-hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        # Pure Python and cheap for a message: no worker thread needed. A long text (a model's reply that
        # prints a file) is hashed on a thread: 3 MB took ~8 s on the engine's loop, and every chat's frames
        # waited for it (decision 452).
        if sum(len(text) for text in texts) > ON_LOOP_CHARS:
            return await asyncio.to_thread(self._vectors, texts)
        return self._vectors(texts)

    def _vectors(self, texts: Sequence[str]) -> Vectors:
        # numpy here: config check builds one, embeds nothing.
        import numpy as np

        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            # Each distinct word hashed once, added as often as it occurs (whole numbers: the same sum).
            for token, count in Counter(_WORD.findall(text.lower()) or [EMPTY_TOKEN]).items():
                bucket, sign = self._slot(token)
                out[row, bucket] += sign * count
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # Signed hashing can cancel a row to zero (e.g. two words colliding with opposite signs):
        # fall back to the empty-text vector so every row is still a unit vector.
        zero = norms[:, 0] == 0
        if zero.any():
            bucket, sign = self._slot(EMPTY_TOKEN)
            out[zero, bucket] = sign
            norms[zero] = 1
        out /= norms
        return out

    async def aclose(self) -> None:
        return None

    def _slot(self, token: str) -> tuple[int, float]:
        """The token's bucket and sign; the sign keeps collisions from always adding up."""
        value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
        return value % self._dim, (1.0 if value >> 63 == 0 else -1.0)
