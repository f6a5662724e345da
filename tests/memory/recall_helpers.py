"""A chat written straight into a real store, with vectors from the fake embedder (dim 32).

The embedding queue is bypassed on purpose: these tests are about what search and recall do with
what is stored, so each message's vector is put right after the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, StoredMessage

ALICE = ChatRef("console", "alice")
BOB = ChatRef("telegram", "bob")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DIM = 32


class Conversation:
    """Appends messages a second apart and embeds them (unless told not to)."""

    def __init__(self, store: Storage, embedder: FakeEmbedder | None = None) -> None:
        self.store = store
        self.embedder = embedder or FakeEmbedder(dim=DIM)
        self._tick = 0

    async def bind(self) -> Conversation:
        await self.store.vectors.bind_embedder(self.embedder.model_id, self.embedder.dim)
        return self

    def _next_time(self) -> datetime:
        self._tick += 1
        return T0 + timedelta(seconds=self._tick)

    async def say(
        self,
        text: str,
        role: Role = Role.USER,
        *,
        chat: ChatRef = ALICE,
        embed: bool = True,
        vector: npt.NDArray[np.float32] | None = None,
        type: MessageType = MessageType.TEXT,
        metadata: dict[str, object] | None = None,
    ) -> StoredMessage:
        stored = await self.store.messages.append(
            MessageRecord(chat, role, text, type=type, created_at=self._next_time(), metadata=metadata)
        )
        if embed:
            if vector is None:
                vector = (await self.embedder.embed([text]))[0]
            await self.store.vectors.put([(stored.rowid, vector)])
        return stored

    async def filler(self, count: int, *, chat: ChatRef = ALICE, embed: bool = True) -> list[StoredMessage]:
        """Small talk that shares no word with the topics the tests search for."""
        said = []
        for i in range(count):
            role = Role.USER if i % 2 == 0 else Role.ASSISTANT
            said.append(await self.say(f"filler number {i} lorem ipsum dolor", role, chat=chat, embed=embed))
        return said

    async def new_segment(self, chat: ChatRef = ALICE) -> None:
        await self.store.messages.append(
            MessageRecord(chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=self._next_time())
        )

    async def segment_id(self, chat: ChatRef = ALICE) -> int:
        return (await self.store.segments.current(chat)).id


def rowids(messages: Sequence[StoredMessage]) -> set[int]:
    return {m.rowid for m in messages}


def one_hot(index: int) -> npt.NDArray[np.float32]:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[index] = 1.0
    return vector


class FixedEmbedder(FakeEmbedder):
    """Embeds every text as one given vector: with `one_hot` it makes orthogonal test cases."""

    def __init__(self, vector: npt.NDArray[np.float32]) -> None:
        super().__init__(dim=DIM)
        self.vector = vector

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.vector for _ in texts])


class BrokenEmbedder(FakeEmbedder):
    """An embedder whose backend is down."""

    def __init__(self) -> None:
        super().__init__(dim=DIM)
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        raise RuntimeError("embedding endpoint unreachable")
