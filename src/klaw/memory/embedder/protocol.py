"""The contract every embedding backend fulfils."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from klaw.errors import KlawError

if TYPE_CHECKING:  # numpy where a vector is touched: not to list tools or open the store (decision 437)
    import numpy as np
    import numpy.typing as npt

Vectors: TypeAlias = "npt.NDArray[np.float32]"


class EmbedderError(KlawError, RuntimeError):
    """An embedder could not produce vectors; the message says why and what to do."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot run in this installation at all (its package is not installed): no retry can
    help, so the engine refuses to start on it and work queued for it fails at once, the message naming
    the fix."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    `embed` returns a float32 array of shape `[len(texts), dim]` whose rows are L2-normalised, so
    cosine similarity is a dot product. It is async because the core is async: local models run
    their forward pass off the event loop, remote ones await HTTP. `model_id` names the model and
    its vector space (recorded in `index_meta`: vectors of different ids are never mixed).
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> Vectors: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class QueryEmbedder(Embedder, Protocol):
    """An embedder trained to embed a search query unlike a stored text (e5's "query: " and "passage: "
    prefixes): `embed` is for what is stored, `embed_queries` for what is searched with."""

    async def embed_queries(self, texts: Sequence[str]) -> Vectors: ...


class WrappedEmbedder:
    """The base of an embedder wrapping another (a cache, a counter): the inner one's model id and size,
    its `embed`, and an `aclose` that closes it; a subclass overrides what it changes. It has no
    `embed_queries`, so a wrapper is a `QueryEmbedder` only when it defines one itself."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await self._inner.embed(texts)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """Vectors of `texts` as search queries: the query form when `embedder` has one, else `embed`.

    Every search embeds its query through this, every stored text through `embed`; an embedder without
    the distinction (MiniLM, OpenAI) answers both the same way. It looks the method up rather than
    asking `isinstance(embedder, QueryEmbedder)`: a runtime protocol check walks the protocol's members
    on every call (~25 µs, every turn's query: decision 220), and `embed_queries` is the only member an
    `Embedder` may lack."""
    query_form = getattr(embedder, "embed_queries", None)
    if callable(query_form):
        queries: Vectors = await query_form(texts)
        return queries
    return await embedder.embed(texts)
