"""A search told which rowids a turn already shows (`exclude`) answers as a caller dropping them would,
and reads only what it returns: the rows of its hits, and no word counts for the turn's own message
(decision 223)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.shared import vector_matrix
from klaw.store.shared.vector_quant import shortlist
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_floats import FloatFile
from tests.store.statement_trace import traced

ALICE = ChatRef("console", "alice")
DIM = 8


def vector(i: int) -> np.ndarray:
    angle = i / 10
    v = np.zeros(DIM, dtype=np.float32)
    v[0], v[1] = np.cos(angle), np.sin(angle)
    return v


async def test_left_out_rowids_take_no_place_on_either_side(storage: Storage) -> None:
    await storage.vectors.bind_embedder("test-embedder", DIM)
    stored = [
        await storage.messages.append(MessageRecord(ALICE, Role.USER, f"garden {'tomato ' * (i % 4)}note {i}"))
        for i in range(12)
    ]
    await storage.vectors.put([(m.rowid, vector(i)) for i, m in enumerate(stored)])
    everything = await storage.search.full_text(ALICE, "garden tomato", limit=12)
    left_out = {hit.message.rowid for hit in everything[:3]} | {stored[5].rowid}
    dropped = [hit for hit in everything if hit.message.rowid not in left_out][:4]
    found = await storage.search.full_text(ALICE, "garden tomato", limit=4, exclude=left_out)
    assert [(h.message.rowid, h.score) for h in found] == [(h.message.rowid, h.score) for h in dropped]

    near = await storage.search.nearest(ALICE, vector(0), limit=12)
    left_out = {near[0].message.rowid, near[2].message.rowid}
    kept = await storage.search.nearest(ALICE, vector(0), limit=3, exclude=left_out)
    expected = [h for h in near if h.message.rowid not in left_out][:3]
    assert [h.message.rowid for h in kept] == [h.message.rowid for h in expected]
    assert [h.score for h in kept] == pytest.approx([h.score for h in expected])


async def test_a_turn_search_reads_the_rows_it_returns_and_no_counts_for_its_own_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 messages match; the turn's own message (its segment's last, in `messages_fts_last`) is left
    out. Before, every match's row was read to return 5, and each word of the query was counted in
    the whole index to score the turn's own message, which the caller then dropped."""
    statements = traced(monkeypatch)
    store = await SqliteStore.open(tmp_path / "traced.db")
    try:
        await store.messages.append_many(
            [MessageRecord(ALICE, Role.USER, f"the garden needs water, day {i}") for i in range(300)]
        )
        own = await store.messages.append(MessageRecord(ALICE, Role.USER, "what about the garden water?"))
        statements.clear()
        hits = await store.search.full_text(ALICE, "garden water", limit=5, exclude={own.rowid})
    finally:
        await store.aclose()
    assert len(hits) == 5 and own.rowid not in {hit.message.rowid for hit in hits}
    looked_up = [bindings for sql, bindings in statements if "FROM json_each(?) AS j CROSS JOIN messages m" in sql]
    assert sum(len(str(b[0]).split(",")) for b in looked_up if isinstance(b, tuple) and b[0] != "[]") <= 5
    assert not [sql for sql, _ in statements if sql.startswith("SELECT count(*) FROM messages_fts WHERE")]


async def test_the_vector_rescore_reads_no_left_out_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window a turn shows is the nearest to its own words: shortlisted, then rescored (a vec0 point
    lookup each, the costliest part of a small chat's vector search) and dropped. Left out of the int8
    shortlist instead, the rescore reads `shortlist(limit)` rows, none of them left out (decision 231).
    A chat this small is rescored from its float rows in memory (decision 350): here it is read from
    the database as a chat past `EXACT_ROWS_MAX` is."""
    monkeypatch.setattr(vector_matrix, "EXACT_ROWS_MAX", 0)
    statements = traced(monkeypatch)
    asked: list[list[int]] = []  # the rows asked of the float file beside the database (decision 534)
    read = FloatFile.read

    def spied(self: FloatFile, rowids: Sequence[int], *rest: Any) -> list[bytes | None]:
        asked.append(list(rowids))
        return read(self, rowids, *rest)

    monkeypatch.setattr(FloatFile, "read", spied)
    store = await SqliteStore.open(tmp_path / "traced.db")
    try:
        await store.vectors.bind_embedder("test-embedder", DIM)
        stored = await store.messages.append_many([MessageRecord(ALICE, Role.USER, f"note {i}") for i in range(120)])
        await store.vectors.put([(m.rowid, vector(i)) for i, m in enumerate(stored)])
        near = await store.search.nearest(ALICE, vector(0), limit=60)
        window = {hit.message.rowid for hit in near[:30]}
        statements.clear()
        asked.clear()
        kept = await store.search.nearest(ALICE, vector(0), limit=5, exclude=window)
    finally:
        await store.aclose()
    assert [h.message.rowid for h in kept] == [h.message.rowid for h in near[30:35]]
    assert not [sql for sql, _ in statements if "JOIN vec_messages AS v" in sql]  # all from the file
    assert len(asked) == 1
    assert len(asked[0]) == shortlist(5) and not window & set(asked[0])


async def test_neighbours_come_with_the_rows_a_search_reads_next(storage: Storage) -> None:
    """Hybrid search ranks a hit's neighbours by their text: their rows come in the same call, less
    the hits themselves and what the turn already shows (one round trip instead of two)."""
    said = [
        await storage.messages.append(MessageRecord(ALICE, Role.USER if i % 2 == 0 else Role.ASSISTANT, text))
        for i, text in enumerate(["which colour won?", "sage green", "and the trim?", "white", "lovely"])
    ]
    around, rows = await storage.search.neighbours_with_rows(said[1:3], 1, exclude={said[3].rowid})
    assert around == await storage.search.neighbours(said[1:3], 1)
    assert around[said[1].rowid] == [(said[0].rowid, 1), (said[2].rowid, 1)]
    assert [m.content for m in rows] == ["which colour won?"]
    assert await storage.search.neighbours_with_rows([], 1) == ({}, [])


async def test_a_search_reads_only_the_neighbours_it_names_once_it_saw_them_all(storage: Storage) -> None:
    """`keep` is shown every neighbour found, once, and only the messages it names are read
    (decision 470: hybrid search reads those it can weigh); None reads them all."""
    said = [
        await storage.messages.append(MessageRecord(ALICE, Role.USER if i % 2 == 0 else Role.ASSISTANT, f"said {i}"))
        for i in range(9)
    ]
    shown: list[dict[int, list[tuple[int, int]]]] = []

    def first_only(around: dict[int, list[tuple[int, int]]]) -> set[int]:
        shown.append(around)
        return {said[1].rowid, said[7].rowid, 10**9}  # a rowid no neighbour has is not read either

    around, rows = await storage.search.neighbours_with_rows(said[3:6:2], 2, keep=first_only)
    assert shown == [around] and around == await storage.search.neighbours(said[3:6:2], 2)
    assert [m.content for m in rows] == ["said 1", "said 7"]
    _, every = await storage.search.neighbours_with_rows(said[3:6:2], 2, keep=lambda _: None)
    assert [m.content for m in every] == ["said 1", "said 2", "said 4", "said 6", "said 7"]


async def test_a_window_holding_the_best_matches_is_neither_scored_nor_read_and_another_chat_s_last_not_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window a turn shows is its newest messages, often the best matches of its own words. Before,
    full text ranked them with the rest, looked their rows up and dropped them, then looked up the next
    slice of matches to fill the places; and another chat's last message, waiting in
    `messages_fts_last` within this chat's rowids, had its words counted in the whole index to be
    scored, then was dropped as out of scope. Now neither is scored: the first rows looked up are the
    answer, the same as a caller dropping the window would get (decision 300)."""
    bob = ChatRef("telegram", "bob")
    statements = traced(monkeypatch)
    store = await SqliteStore.open(tmp_path / "traced.db")
    try:
        await store.messages.append_many(
            [MessageRecord(ALICE, Role.USER, f"the garden needs water, day {i}") for i in range(300)]
        )
        await store.messages.append(MessageRecord(bob, Role.USER, "garden water"))  # Bob's last message
        window = await store.messages.append_many(
            [MessageRecord(ALICE, Role.USER, f"garden water garden water {i}") for i in range(20)]
        )
        own = await store.messages.append(MessageRecord(ALICE, Role.USER, "and the garden water?"))
        left_out = {m.rowid for m in window} | {own.rowid}
        everything = await store.search.full_text(ALICE, "garden water", limit=40)
        statements.clear()
        hits = await store.search.full_text(ALICE, "garden water", limit=10, exclude=left_out)
    finally:
        await store.aclose()
    dropped = [hit for hit in everything if hit.message.rowid not in left_out][:10]
    assert [(h.message.rowid, h.score) for h in hits] == [(h.message.rowid, h.score) for h in dropped]
    looked_up = [bindings for sql, bindings in statements if "FROM json_each(?) AS j CROSS JOIN messages m" in sql]
    read = [json.loads(str(b[0])) for b in looked_up if isinstance(b, tuple)]
    assert sum(len(rowids) for rowids in read) == 10 and not left_out & {r for rowids in read for r in rowids}
    assert not [sql for sql, _ in statements if sql.startswith("SELECT count(*) FROM messages_fts WHERE")]
