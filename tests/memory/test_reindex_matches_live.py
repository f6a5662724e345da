"""Reindex equals live ingestion: a real engine runs turns (a tool call, /model, /new, a failed turn,
a second chat), then a copy of its home is reindexed and both databases are compared row by row,
by the store's full-text and vector search results, and by what the agent recalls from each through
the services it uses (auto-RAG, past conversations, `klaw memory search`'s hybrid search)."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any

from klaw.config import AutoRagConfig, RagConfig, SearchConfig
from klaw.home import KlawHome
from klaw.memory.auto_rag import AutoRagService, format_block
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.hybrid_search import CANDIDATES_PER_SIDE, HybridHit, HybridSearch
from klaw.memory.past_conversations.pipeline import Retrieval
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.memory.reindex import reindex
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.records import SummaryHit
from tests.engine.harness import CHAT, Harness, engine_config, running_engine
from tests.memory.summary_helpers import summarizing_reply
from tests.memory.table_dump import dump_tables

OTHER = ChatRef("telegram", "42")
UNUSED_MODELS = engine_config("http://127.0.0.1:9/v1")  # the harness's config; reindex calls no model
QUERIES = ["lighthouse keeper", "northern island storms", "southern harbour boats", "what time is it"]
# Recall settings for the comparison: a window of one message leaves the rest of each segment to
# recall; the fake embedder's 32 buckets put texts sharing a few words at cosine distances of 0.4–0.7,
# so the relevance gate is opened to 0.7; a budget of 60 tokens leaves out some hits 400 would hold.
WINDOW = 1
AUTO_RAG = AutoRagConfig(relevance_threshold=0.7, max_tokens=60)
RAG = RagConfig()
PAST_BUDGET = 2000


async def live_turns(h: Harness, *, overlap: bool) -> None:
    """Turns of two chats. With `overlap`, both chats' turns run at the same moment, so their
    records interleave within one millisecond; otherwise a second passes between steps."""

    async def pause() -> None:
        if not overlap:
            await h.clock.advance(1.0)

    await h.turn("tell me about the old lighthouse keeper on the northern island and his storms")
    await pause()
    await h.engine.submit(CHAT, "/model fake/large")
    await pause()
    h.server.reply_tool_calls([("current_time", {"timezone": "UTC"})])
    h.server.reply_text("it is nine in the morning on the northern island, the keeper lights the lamp")
    await h.turn("what time is it on the northern island where the lighthouse keeper lives")
    await pause()
    if overlap:
        before = len(h.delivered)
        await h.say("the southern harbour shelters forty fishing boats in the winter storms", OTHER)
        await h.say("does the keeper of the lighthouse ever visit the southern harbour boats")
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(before + 2)
    else:
        await h.turn("the southern harbour shelters forty fishing boats in the winter storms", OTHER)
    await pause()
    await h.engine.submit(CHAT, "/new")
    await pause()
    h.server.reply_error(500, message="boom")
    await h.turn("this turn fails because the model server answers with an error")
    await pause()
    await h.turn("after the failure the keeper writes about storms and ships in his diary again")
    await pause()
    await h.engine.submit(CHAT, "/status")  # read-only: adds nothing to the log or the database
    async with asyncio.timeout(10):
        await h.engine.embedding_queue.wait_idle()


async def summarize(h: Harness) -> None:
    """Turn the summarizers on once the scripted turns are done (a summary request would take a
    scripted reply) and let them write every summary, and the queue embed them."""
    h.server.default_reply = summarizing_reply
    await h.engine.submit(CHAT, "/summarizer on")
    assert h.engine.summarizer is not None
    async with asyncio.timeout(20):
        await h.engine.summarizer.wait_idle()
        await h.engine.embedding_queue.wait_idle()


async def run_live(tmp_path: Path, *, overlap: bool, summaries: bool = False) -> KlawHome:
    """With `summaries`, the summarizers then write every summary at one instant of the manual clock,
    both chats' records in the same millisecond (rowids follow each chat's order only)."""
    async with running_engine(tmp_path, summarizer={"rollingEvery": 1}) as h:
        await live_turns(h, overlap=overlap)
        if summaries:
            await summarize(h)
        await h.engine.store.settings.set("summarizer", {"enabled": True})  # a stored setting reindex must keep
        home = h.home
    copy = KlawHome(tmp_path / "copy")
    shutil.copytree(home.root, copy.root)
    return copy


async def search_results(path: Path) -> dict[str, list[Any]]:
    store = await SqliteStore.open(path)
    embedder = FakeEmbedder(32)
    try:
        results: dict[str, list[Any]] = {}
        for chat in (CHAT, OTHER):
            for query in QUERIES:
                text_hits = await store.search.full_text(chat, query, limit=10)
                vector = (await embedder.embed([query]))[0]
                near_hits = await store.search.nearest(chat, vector, limit=10)
                results[f"{chat} fts {query}"] = [(h.message.record.id, round(h.score, 9)) for h in text_hits]
                results[f"{chat} knn {query}"] = [(h.message.record.id, round(h.score, 6)) for h in near_hits]
        return results
    finally:
        await store.aclose()


def surrogate_keys(tables: dict[str, list[tuple[Any, ...]]]) -> dict[str, dict[int, Any]]:
    """What each surrogate key stands for, by table: a chat key its (channel, chat_id), a segment id
    its chat and start, a message rowid its record id, an exchange id its chat, start and user message."""
    chats = {row[0]: (row[1], row[2]) for row in tables["chats"]}
    ids = {row[0]: row[1] for row in tables["messages"]}
    return {
        "chats": chats,
        "segments": {row[0]: (chats[row[1]], row[2]) for row in tables["segments"]},
        "messages": ids,
        "exchanges": {row[0]: (chats[row[1]], row[3], ids.get(row[6])) for row in tables["exchanges"]},
    }


def by_natural_keys(tables: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    """The rows with rowids and other surrogate keys replaced by what they point at (message ids,
    a segment's chat and start), for databases whose rowids may differ."""
    keys = surrogate_keys(tables)
    chats, segments, ids = keys["chats"], keys["segments"], keys["messages"]
    return {
        "segments": sorted((chats[chat], start, end) for _, chat, start, end in tables["segments"]),
        "messages": sorted((m[1], m[2], m[3], segments[m[5]], *m[6:]) for m in tables["messages"]),
        "sessions": sorted((chats[s[0]], s[1], segments[s[2]], s[3], s[4]) for s in tables["sessions"]),
        "exchanges": sorted(
            (chats[e[1]], segments[e[2]], e[3], e[4], e[5], ids.get(e[6]), ids.get(e[7])) for e in tables["exchanges"]
        ),
        "vectors": sorted((ids[v[0]], v[3], v[4]) for v in tables["vec_messages"]),
        "fts": sorted((ids[row[0]], *row[1:]) for row in tables["messages_fts"]),
        "settings": tables["settings"],
        "summaries": sorted((s[1], chats[s[2]], segments[s[3]], *s[5:8], s[9]) for s in tables["summaries"]),
    }


async def recall_results(path: Path) -> dict[str, dict[str, Any]]:
    """What the agent would recall from the database at `path`, by service, for every chat and query:
    `klaw memory search`'s hybrid search over all segments; auto-RAG over each segment as the current
    one, its last WINDOW messages shown; past conversations beside the current segment. Rowids,
    segment and exchange ids are replaced by natural keys (`surrogate_keys`), in the past-conversations
    block too, which prints segment and exchange ids: those may legitimately differ between databases
    when chats wrote in the same millisecond (exchange ids often do in the overlapping run: the replay
    does not interleave the chats as the live turns did); what they point at may not."""
    keys = surrogate_keys(await dump_tables(path))
    store = await SqliteStore.open(path)
    embedder = FakeEmbedder(32)
    hybrid = HybridSearch(store, embedder, SearchConfig())
    auto_rag = AutoRagService(AUTO_RAG, hybrid)
    past = PastConversationRetriever(store, embedder, lambda: RAG)

    def found(hit: HybridHit) -> tuple[Any, ...]:
        distance = None if hit.distance is None else round(hit.distance, 6)
        bm25 = None if hit.bm25 is None else round(hit.bm25, 9)
        lender = None if hit.context_of is None else keys["messages"][hit.context_of]
        return (hit.message.record.id, round(hit.score, 9), distance, hit.fts_rank, bm25, lender)

    results: dict[str, dict[str, Any]] = {"memory search": {}, "auto-RAG": {}, "past conversations": {}}
    try:
        for chat in (CHAT, OTHER):
            segments = await store.segments.list(chat)
            current = next(segment for segment in segments if segment.ended_at is None)
            for query in QUERIES:
                hits = await hybrid.search(chat, query, limit=CANDIDATES_PER_SIDE)
                results["memory search"][f"{chat} {query}"] = [found(hit) for hit in hits]
                for segment in segments:
                    shown = {m.rowid for m in await store.messages.window(segment.id, WINDOW)}
                    recalled = await auto_rag.recall(chat, segment.id, query, shown)
                    results["auto-RAG"][f"{chat} segment@{keys['segments'][segment.id][1]} {query}"] = (
                        [(found(r.hit), r.text) for r in recalled],
                        format_block(recalled) if recalled else None,
                    )
                retrieval = await past.retrieve(chat, current.id, query, PAST_BUDGET)
                assert retrieval is not None, "past-conversation retrieval failed: its warning says why"
                results["past conversations"][f"{chat} {query}"] = past_conversations(retrieval, keys)
        return results
    finally:
        await store.aclose()


def recalled_anything(results: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How many of each service's results hold something: comparing empty results would prove nothing."""
    return {
        "memory search": sum(1 for hits in results["memory search"].values() if hits),
        "auto-RAG": sum(1 for hits, _ in results["auto-RAG"].values() if hits),
        "past conversations": sum(1 for found in results["past conversations"].values() if found["block"]),
    }


_BLOCK_ID = re.compile(r"^( *- (segment|exchange)) (\d+) ", re.MULTILINE)


def past_conversations(retrieval: Retrieval, keys: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """A retrieval with its segment and exchange ids replaced by natural keys, in the block too."""

    def hit(found: SummaryHit) -> tuple[Any, ...]:
        summary = found.summary
        exchange = None if summary.exchange_id is None else keys["exchanges"][summary.exchange_id]
        where = (summary.kind, keys["segments"][summary.segment_id], exchange)
        return (*where, summary.text, summary.final, round(found.similarity, 6), found.started_at)

    def natural(match: re.Match[str]) -> str:
        table = "segments" if match[2] == "segment" else "exchanges"
        return f"{match[1]} {keys[table][int(match[3])]} "

    return {
        "segments": [hit(found) for found in retrieval.segments],
        "exchanges": [hit(found) for found in retrieval.exchanges],
        "shown": [(hit(s.hit), [hit(e.hit) for e in s.exchanges]) for s in retrieval.shown],
        "block": None if retrieval.block is None else _BLOCK_ID.sub(natural, retrieval.block),
        "stopped at": retrieval.skipped_by,
    }


async def test_reindex_gives_the_same_rows_and_search_results_as_live_ingestion(tmp_path: Path) -> None:
    home = await run_live(tmp_path, overlap=False)
    database = home.database_file("klaw.db")
    live_path = database.with_name("live.db")
    shutil.copy(database, live_path)
    live = await dump_tables(live_path)
    assert len(live["exchanges"]) == 5 and {row[5] for row in live["exchanges"]} == {"completed", "failed"}
    assert len(live["vec_messages"]) >= 8 and live["embedding_jobs"] == []

    report = await reindex(home, UNUSED_MODELS)
    rebuilt = await dump_tables(database)
    assert rebuilt == live  # every table, rowids and ids included
    assert report.malformed == 0 and report.counts.exchanges == 5
    assert await search_results(database) == await search_results(live_path)
    recalled = await recall_results(live_path)
    found = recalled_anything(recalled)
    assert found["memory search"] > 0 and found["auto-RAG"] > 0 and found["past conversations"] == 0  # no summaries
    assert await recall_results(database) == recalled


async def test_chats_whose_turns_overlapped_give_the_same_rows_up_to_rowids(tmp_path: Path) -> None:
    """Two chats writing in the same millisecond: the log keeps each chat's order but not their
    interleaving, so rowids (and the ids that follow from them) may differ; nothing else does.
    Summaries included: rebuilt from their log records, not by the model."""
    home = await run_live(tmp_path, overlap=True, summaries=True)
    database = home.database_file("klaw.db")
    live_path = database.with_name("live.db")
    shutil.copy(database, live_path)
    live = await dump_tables(live_path)
    # Every completed exchange summarized, the closed segment's summary final, the two open ones rolling.
    completed = sum(1 for row in live["exchanges"] if row[5] == "completed")
    assert [(row[1], row[7]) for row in live["summaries"]].count(("exchange", 1)) == completed == 5
    assert sorted((row[1], row[7]) for row in live["summaries"] if row[1] == "segment") == [
        ("segment", 0),
        ("segment", 0),
        ("segment", 1),
    ]
    assert len(live["vec_summaries"]) == 6 and all(row[12] is not None for row in live["summaries"])
    await reindex(home, UNUSED_MODELS)
    rebuilt = await dump_tables(database)
    assert by_natural_keys(rebuilt) == by_natural_keys(live)
    assert await search_results(database) == await search_results(live_path)
    recalled = await recall_results(live_path)
    assert all(count > 0 for count in recalled_anything(recalled).values())
    assert await recall_results(database) == recalled
