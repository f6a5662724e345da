"""Where one auto-RAG search's time goes: its vector side, its full-text side, and the rest.

`klaw bench scale` times auto-RAG as a whole; at 1M messages that did not say which side the
search waits for (decision 235). Hybrid search runs its two sides at once, then reads the hits'
neighbours, then ranks in Python, so the whole is about the longer side + neighbours + ranking.
`timed_store` hands out the bench's own store with its search repository wrapped: each call of
the production path (`nearest`, `full_text`, `neighbours_with_rows`) is timed where it runs, side
by side with the other, as a turn runs it. Nothing of the search changes: the wrapper only reads
the clock around the store's own calls.

Per query, `SearchSplit.take` records:
- vector side: the store's KNN (`nearest`: the int8 scan and the exact rescore; the query
  embedding is not in it, the bench gives it precomputed);
- full-text side: the store's bm25 ranking (`full_text`, both calls when the first is crowded);
- neighbours: reading the messages around the hits with their rows;
- the rest: the whole search less the longer side and the neighbours (fusion, weighing, coverage,
  auto-RAG's gate and budget, and the hops between threads).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from klaw.bench.stats import Latency
from klaw.store.protocol import SearchRepository, Storage


@dataclass(frozen=True)
class SplitFigures:
    """The split of the timed searches, each part's p50/p95 over the queries."""

    vector_side: Latency
    full_text_side: Latency
    neighbours: Latency
    rest: Latency

    def long_pole(self) -> str:
        """The side a search waits for (by p50)."""
        return "full text" if self.full_text_side.p50_ms >= self.vector_side.p50_ms else "vector"


@dataclass
class SearchSplit:
    """Seconds spent in each timed call since the last `take`, and the split of each query taken."""

    _pending: dict[str, float] = field(default_factory=dict)
    _taken: dict[str, list[float]] = field(default_factory=dict)

    def add(self, part: str, seconds: float) -> None:
        self._pending[part] = self._pending.get(part, 0.0) + seconds

    def clear(self) -> None:
        """Forget the calls since the last `take` (an untimed search)."""
        self._pending.clear()

    def take(self, total: float) -> None:
        """Close one query whose whole search took `total` seconds."""
        vector = self._pending.get("vector", 0.0)
        text = self._pending.get("full_text", 0.0)
        neighbours = self._pending.get("neighbours", 0.0)
        parts = {
            "vector": vector,
            "full_text": text,
            "neighbours": neighbours,
            "rest": max(0.0, total - max(vector, text) - neighbours),
        }
        for part, seconds in parts.items():
            self._taken.setdefault(part, []).append(seconds)
        self._pending.clear()

    def figures(self) -> SplitFigures:
        def of(part: str) -> Latency:
            return Latency.of(self._taken.get(part, []))

        return SplitFigures(of("vector"), of("full_text"), of("neighbours"), of("rest"))


class _TimedSearch:
    """The store's search repository, each call of hybrid search's path timed into `split`."""

    _PARTS: ClassVar[dict[str, str]] = {
        "nearest": "vector",
        "full_text": "full_text",
        "neighbours_with_rows": "neighbours",
    }

    def __init__(self, search: SearchRepository, split: SearchSplit) -> None:
        self._search = search
        self._split = split

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._search, name)
        part = self._PARTS.get(name)
        if part is None:
            return method
        return self._timed(part, method)

    def _timed(self, part: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self._split.add(part, time.perf_counter() - started)

        return call


class _TimedStore:
    """`store` itself, but for its search repository, which is timed."""

    def __init__(self, store: Storage, split: SearchSplit) -> None:
        self._store = store
        self.search = _TimedSearch(store.search, split)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def timed_store(store: Storage) -> tuple[Storage, SearchSplit]:
    """`store` with its search calls timed, and where the times go."""
    split = SearchSplit()
    return cast(Storage, _TimedStore(store, split)), split
