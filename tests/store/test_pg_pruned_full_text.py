"""PostgreSQL full text does not score every message holding a common word (store/postgres/bm25_pruned.py,
decision 213): on a chat where three words are held by a third of the messages each, a search naming
them with rarer words ranks only the candidates (a rare word, or two common ones), each with the very
score the full statement (`bm25.ranked_sql`, every match scored) gives it; when they are too few to
fill the places asked for, every match is ranked as before. Fails on the old code: there was no
candidate pass (the module does not exist)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from klaw.bench.pg_fill import append_conversation
from klaw.store.postgres.bm25 import ranked_sql, search_terms
from klaw.store.postgres.bm25_pruned import common_words, pruned_sql
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import fetch_all
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.shared.search_scope import MESSAGE_SCOPE, scope_sql
from klaw.store.sqlite.fts_query import search_words
from tests.conftest import new_database
from tests.pg_server import PgServer

Ranked = list[tuple[int, float]]
CHAT = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
COMMON = [
    "garden",
    "coffee",
    "morning",
]  # each in ~12 % of the messages (~35 % with their neighbours): common, yet telling
RARE = ["telescope", "harpsichord", "quarantine", "lighthouse", "volcano", "origami"]
FILLER = ["we", "talked", "about", "it", "again", "later", "then", "walked", "home", "slowly"]


def texts(count: int) -> list[str]:
    pick = random.Random(7)
    out = []
    for _ in range(count):
        words = [w for w in COMMON if pick.random() < 0.12] + pick.sample(FILLER, pick.randint(2, 8))
        words += [w for w in RARE if pick.random() < 0.01]
        pick.shuffle(words)
        out.append(" ".join(words))
    return out


@pytest.fixture
async def store(postgres_server: PgServer) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(postgres_server.dsn(new_database(postgres_server)), variable="KLAW_TEST")
    records = [
        MessageRecord(CHAT, Role.USER if i % 2 == 0 else Role.ASSISTANT, t, created_at=T0 + timedelta(seconds=i))
        for i, t in enumerate(texts(1500))
    ]
    await append_conversation(opened, records)
    try:
        yield opened
    finally:
        await opened.aclose()


async def both_ways(store: PostgresStore, query: str, limit: int) -> tuple[Ranked, dict[int, float], Ranked]:
    """(the full statement's best `limit` as (rowid, score), every match's score by rowid, the candidates' best)."""
    async with store.db.connection() as connection:
        chat_key = await ChatKeys().find(connection, CHAT)
        assert chat_key is not None
        where, params = scope_sql(MESSAGE_SCOPE, chat_key, None, None, None, "%s")
        terms = await search_terms(connection, search_words(query))
        every = await fetch_all(connection, *ranked_sql(terms, where, params, 100_000))
        common = common_words(terms)
        assert common is not None
        pruned = await fetch_all(connection, *pruned_sql(terms, common, where, params, limit))
    scores = {int(r[0]): float(r[10]) for r in every}
    return [(int(r[0]), float(r[10])) for r in every[:limit]], scores, [(int(r[0]), float(r[10])) for r in pruned]


@pytest.mark.parametrize(
    "query",
    ["garden coffee telescope harpsichord", "morning coffee in the lighthouse or a volcano", "origami garden"],
)
async def test_a_search_with_common_words_ranks_the_candidates_with_the_full_scores(
    store: PostgresStore, query: str
) -> None:
    full, scores, candidates = await both_ways(store, query, limit=10)
    found = [(h.message.rowid, h.score) for h in await store.search.full_text(CHAT, query, limit=10)]
    assert found == candidates  # the candidates filled the ten places
    assert all(scores[rowid] == score for rowid, score in found)  # each the score every match gets
    assert len({r for r, _ in found} & {r for r, _ in full}) >= 8  # and nearly the same messages


async def test_too_few_candidates_fall_back_to_every_match(store: PostgresStore) -> None:
    full, _, candidates = await both_ways(store, "garden coffee morning", limit=600)
    found = await store.search.full_text(CHAT, "garden coffee morning", limit=600)
    assert len(candidates) < 600  # messages holding two of them are too few
    assert [(h.message.rowid, h.score) for h in found] == full
