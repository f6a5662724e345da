"""The read connections map klaw.db into memory (decision 273): a search's pages are read where the OS
keeps them instead of being copied into each connection's small page cache by a read() call, which
made the exact rescore of a vector shortlist walk its vec0 chunk's overflow pages through the kernel.
Answers are the same either way; here the reads map the file, and still see every committed write
and no forgotten message. On the old code the read connections did not map it (mmap_size 0)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import numpy as np

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.query import fetch_value
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def mapped(connection: apsw.Connection) -> int:
    return int(fetch_value(connection, "PRAGMA mmap_size") or 0)


async def test_searches_read_a_mapped_file_and_see_what_was_committed(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        await store.vectors.bind_embedder("test-embedder", 4)
        texts = ["the orchid needs water", "a cactus needs sun", "orchids like shade"]
        records = [
            MessageRecord(CHAT, Role.USER if i % 2 == 0 else Role.ASSISTANT, text, created_at=T0 + timedelta(seconds=i))
            for i, text in enumerate(texts)
        ]
        rowids = [m.rowid for m in await store.messages.append_many(records)]
        vectors = np.eye(4, dtype=np.float32)[:3]
        await store.vectors.put(list(zip(rowids, vectors, strict=True)))

        assert await store.db.read(mapped) > 0
        hits = await store.search.full_text(CHAT, "orchid", limit=5)
        assert {rowids[0], rowids[2]} <= {hit.message.rowid for hit in hits}
        nearest = await store.search.nearest(CHAT, vectors[1], limit=1)
        assert [hit.message.rowid for hit in nearest] == [rowids[1]]

        await store.db.run(lambda connection: connection.execute("DELETE FROM messages WHERE rowid = ?", (rowids[0],)))
        hits = await store.search.full_text(CHAT, "orchid", limit=5)
        assert rowids[2] in {hit.message.rowid for hit in hits}
        assert rowids[0] not in {hit.message.rowid for hit in hits}
    finally:
        await store.aclose()
