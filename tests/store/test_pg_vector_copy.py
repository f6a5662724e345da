"""PostgreSQL's in-memory int8 copy of a chat's vectors (decision 221) answers exactly what the server's
exact search answers, and never from a stale copy: another engine or process inserting, forgetting or
replacing the chat's vectors is seen by the next search, through a real server (tests/pg_server.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import numpy.typing as npt
import pytest

from klaw.store.archival_records import forget_record
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef, MessageRecord, Role, utc_now
from tests.conftest import new_database
from tests.pg_server import PgServer
from tests.store.raw import rows

CHAT = ChatRef("console", "me")
DIM = 16
CACHE_BYTES = 16 << 20


@pytest.fixture
async def engines(postgres_server: PgServer) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one fresh database, each with its own pool and vector copies: two engines."""
    database = new_database(postgres_server)
    opened = [
        await PostgresStore.open(
            postgres_server.dsn(database),
            variable="KLAW_TEST_DATABASE_URL",
            pool_size=3,
            vector_cache_bytes=CACHE_BYTES,
        )
        for _ in range(2)
    ]
    for store in opened:
        await store.vectors.bind_embedder("test-embedder", DIM)
    try:
        yield opened[0], opened[1]
    finally:
        for store in opened:
            await store.aclose()
        postgres_server.admin(f"DROP DATABASE {database} WITH (FORCE)")


def unit(rng: np.random.Generator, count: int) -> npt.NDArray[np.float32]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    unit_rows: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit_rows


async def add(store: PostgresStore, vectors: npt.NDArray[np.float32]) -> list[tuple[int, str]]:
    """Messages appended to the chat with these vectors; their (rowid, record id)."""
    added: list[tuple[int, str]] = []
    for vector in vectors:
        stored = await store.messages.append(MessageRecord(CHAT, Role.USER, f"message {len(added)}"))
        added.append((stored.rowid, stored.record.id))
        await store.vectors.put([(stored.rowid, vector)])
    return added


async def exact(store: PostgresStore, query: npt.NDArray[np.float32], limit: int) -> list[int]:
    """The server's exact answer, as the search without a copy asks it."""
    found = await rows(
        store,
        "SELECT rowid FROM message_vectors ORDER BY embedding <=> ?, rowid LIMIT ?",
        query,
        limit,
    )
    return [int(row[0]) for row in found]


async def nearest(store: PostgresStore, query: npt.NDArray[np.float32], limit: int = 10) -> list[int]:
    return [hit.message.rowid for hit in await store.search.nearest(CHAT, query, limit=limit)]


async def copy_version(store: PostgresStore) -> int | None:
    key = int((await rows(store, "SELECT id FROM chats"))[0][0])
    found = store.vector_cache.cached(key, DIM)
    return None if found is None else found[1]


async def server_version(store: PostgresStore) -> int:
    return int((await rows(store, "SELECT version FROM vector_marks"))[0][0])


async def test_the_copy_answers_exact_search_and_takes_its_own_inserts(
    engines: tuple[PostgresStore, PostgresStore],
) -> None:
    a, _ = engines
    rng = np.random.default_rng(7)
    await add(a, unit(rng, 200))
    for query in unit(rng, 5):
        assert await nearest(a, query) == await exact(a, query, 10)
    assert a.vector_cache.cached_bytes > 0  # searched from the copy
    cached = a.vector_cache.cached_bytes
    await add(a, unit(rng, 3))  # this engine's own inserts are appended, no reload
    assert a.vector_cache.cached_bytes > cached
    assert await copy_version(a) == await server_version(a)
    query = unit(rng, 1)[0]
    assert await nearest(a, query, 25) == await exact(a, query, 25)


async def test_another_engines_insert_and_forget_are_seen_by_the_next_search(
    engines: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = engines
    rng = np.random.default_rng(11)
    await add(a, unit(rng, 150))
    query = unit(rng, 1)[0]
    assert await nearest(a, query) == await exact(a, query, 10)
    stale = await copy_version(a)
    assert stale is not None

    # Engine B (another process on the same database) adds the vector closest to the query.
    [(closest, closest_id)] = await add(b, query[None, :])
    assert await nearest(a, query) == await exact(a, query, 10)  # the copy is behind: the server answers
    assert (await nearest(a, query))[0] == closest
    # The copy caught up by reading only the vector it lacked, not the chat's 151.
    assert a.vector_cache.loads == 1
    assert await copy_version(a) == await server_version(a)

    # B forgets it: A's next search never returns it, and is the exact answer over what is left.
    await b.messages.append(forget_record(CHAT, [closest_id], "message", [], utc_now()))
    answer = await nearest(a, query)
    assert closest not in answer
    assert answer == await exact(a, query, 10)
    assert await nearest(a, query) == answer  # a copy missing a deleted row is read again whole
    assert a.vector_cache.loads == 2
    assert await copy_version(a) == await server_version(a)


async def test_vectors_replaced_under_the_same_rowids_are_not_served_from_the_old_copy(
    engines: tuple[PostgresStore, PostgresStore],
) -> None:
    """What `klaw reindex` or a re-embedding does to a chat another engine has cached."""
    a, b = engines
    rng = np.random.default_rng(5)
    added = await add(a, unit(rng, 120))
    query = unit(rng, 1)[0]
    before = await nearest(a, query)
    rowids = [rowid for rowid, _ in added]
    await rows(b, "DELETE FROM message_vectors WHERE rowid = ANY(?)", rowids)
    replaced = unit(rng, len(rowids))
    replaced[-1] = query  # the last message is now the closest
    await b.vectors.put(list(zip(rowids, replaced, strict=True)))
    after = await nearest(a, query)
    assert after == await exact(a, query, 10)
    assert after[0] == rowids[-1] and after != before
    # The next search reads the copy again whole (its rowids alone look current) and answers from it.
    assert await nearest(a, query) == after
    assert a.vector_cache.loads == 2
    assert await copy_version(a) == await server_version(a)


async def test_a_forget_in_this_engine_drops_its_copy_at_once(engines: tuple[PostgresStore, PostgresStore]) -> None:
    a, _ = engines
    rng = np.random.default_rng(3)
    added = await add(a, unit(rng, 50))
    query = unit(rng, 1)[0]
    first = (await nearest(a, query))[0]
    assert a.vector_cache.cached_bytes > 0
    gone = next(record_id for rowid, record_id in added if rowid == first)
    await a.messages.append(forget_record(CHAT, [gone], "message", [], utc_now()))
    assert a.vector_cache.cached_bytes == 0  # no quantized vector of a forgotten message stays in memory
    assert first not in await nearest(a, query)
