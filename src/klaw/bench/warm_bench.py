"""`klaw bench warm`: how long filling the vector cache takes as chats multiply (it ran before the socket opened).

A store with `chats` chats of `per_chat` vectors each is built through the store API, then reopened
and `warm_cache` timed, as an engine start does. The same script against an older klaw measures the
per-chat warming it replaced (one vec0 query and one count per chat).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class WarmResult:
    chats: int
    per_chat: int
    dim: int
    chats_loaded: int
    warm_seconds: float


async def measure_warm(root: Path, *, chats: int = 3050, per_chat: int = 10, dim: int = 384) -> WarmResult:
    path = root / "klaw.db"
    rng = np.random.default_rng(1)
    store = await SqliteStore.open(path)
    try:
        await store.vectors.bind_embedder("bench", dim)
        for n in range(chats):
            chat = ChatRef("web", f"chat{n}")
            records = [
                MessageRecord(
                    chat, Role.USER, f"message {i} of chat {n}", created_at=T0 + timedelta(seconds=n * per_chat + i)
                )
                for i in range(per_chat)
            ]
            stored = await store.messages.append_many(records)
            vectors = rng.standard_normal((per_chat, dim)).astype(np.float32)
            await store.vectors.put([(message.rowid, vectors[i]) for i, message in enumerate(stored)])
    finally:
        await store.aclose()
    store = await SqliteStore.open(path, vector_cache_bytes=1 << 30)
    try:
        await store.vectors.bind_embedder("bench", dim)
        started = time.perf_counter()
        loaded = await store.vectors.warm_cache()
        elapsed = time.perf_counter() - started
    finally:
        await store.aclose()
    return WarmResult(chats, per_chat, dim, loaded, round(elapsed, 3))
