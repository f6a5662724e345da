"""Summaries go through the conversation log: a real engine summarizes with the fake OpenAI server,
the summaries are `exchange_summary` / `segment_summary` records folded into `summaries`, invisible
to every reader of messages, erased from the log by `/forget`, and rebuilt by `klaw reindex`
without a single model call."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.reindex import reindex
from klaw.store.records import MessageType
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, Harness, engine_config, running_engine
from tests.memory.summary_helpers import summarizing_reply
from tests.memory.table_dump import dump_tables

SUMMARIZING = {"summarizer": {"enabled": True, "rollingEvery": 1}}
TEA = "how do I brew green tea at the right water temperature"
BIKE = "how do I oil a squeaking bike chain before a long ride"
TAXES = "which expenses are deductible on my income taxes this year"
SUMMARY_TYPES = (MessageType.EXCHANGE_SUMMARY, MessageType.SEGMENT_SUMMARY)


async def settle(h: Harness) -> None:
    assert h.engine.summarizer is not None
    async with asyncio.timeout(20):
        await h.engine.summarizer.wait_idle()
        await h.engine.embedding_queue.wait_idle()


async def turns(h: Harness) -> None:
    """Two exchanges, `/new`, a third: one final segment summary, one rolling; a second passes
    between steps (the summaries are written at the clock's time)."""
    h.server.default_reply = summarizing_reply
    for text in (TEA, BIKE):
        await h.turn(text)
        await settle(h)
        await h.clock.advance(1.0)
    await h.engine.submit(CHAT, "/new")
    await settle(h)
    await h.clock.advance(1.0)
    await h.turn(TAXES)
    await settle(h)


async def logged(home: KlawHome) -> list[tuple[MessageType, str, dict[str, object]]]:
    log = ConversationLog(home.conversations)
    found = []
    for chat_dir in log.chat_dirs():
        for record in (await log.read(log.files(chat_dir))).records:
            if record.type in SUMMARY_TYPES:
                found.append((record.type, record.content, dict(record.metadata or {})))
    return found


def files_holding(root: Path, text: str) -> list[Path]:
    needle = text.encode("utf-8")
    return [p for p in root.rglob("*") if p.is_file() and needle in _bytes_of(p)]


def _bytes_of(path: Path) -> bytes:
    """The file's bytes; nothing for one gone between listing and reading (a running engine's SQLite journal,
    such as the docs index's while it is built in the background)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


async def test_summaries_are_log_records_that_no_reader_of_messages_sees(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **SUMMARIZING) as h:
        await turns(h)
        store = h.engine.store  # the summaries as stored
        first = (await h.engine.chats.sessions(CHAT))[0]
        summaries = await store.summaries.in_segment(first.id)
        kinds = [(s.kind.value, s.final) for s in summaries]
        assert kinds == [("segment", True), ("exchange", True), ("exchange", True)]
        records = await logged(h.home)
        assert {r[1] for r in records} >= {s.text for s in summaries}
        exchange_record = next(r for r in records if r[0] is MessageType.EXCHANGE_SUMMARY)
        assert set(exchange_record[2]) == {"exchange", "sources", "model"}
        for summary in summaries:  # each names its record; the messages row keeps no text
            assert summary.record_id is not None
            stored = await store.messages.get(summary.record_id)
            assert stored is not None and stored.content == "" and stored.record.type in SUMMARY_TYPES
        # Never a message: not matched by full text, not in the window or the counts, never embedded.
        assert await store.search.full_text(CHAT, "person asked", limit=10) == []
        current = await store.segments.current(CHAT)
        window = await store.messages.window(current.id, 50)
        assert all(m.record.type not in SUMMARY_TYPES for m in window)
        assert await store.messages.count_in_segment(current.id) == 2
        assert all(m.record.type not in SUMMARY_TYPES for m in await store.history.segment_messages(first.id))
        # The next turn's request shows the summary layer once and no summary as a message.
        h.server.reply_text("ok")
        await h.turn("and what about black tea?")
        messages = h.last_request_messages()
        conversation = [m for m in messages if m["role"] in ("user", "assistant")]
        assert not any(str(m["content"]).startswith("The person asked") for m in conversation)


async def test_forgetting_a_summarized_exchange_erases_its_summary_from_database_log_and_reindex(
    tmp_path: Path,
) -> None:
    async with running_engine(tmp_path, **SUMMARIZING) as h:
        await turns(h)
        home = h.home
        store = h.engine.store  # the summaries as stored
        first = (await h.engine.chats.sessions(CHAT))[0]
        tea = (await h.engine.chats.turns(CHAT, session=first.id))[0]
        tea_summary = await store.summaries.exchange_summary(tea.id)
        assert tea_summary is not None and files_holding(home.conversations, tea_summary.text)
        reply = await h.engine.submit(CHAT, f"/forget exchange {tea.id}")
        assert reply.command_reply is not None and reply.command_reply.startswith("Forgot exchange")
        await h.clock.advance(h.engine.config.summarizer.idle_seconds)  # the summarizers' next pass
        await settle(h)  # the segment summary is written again from what is left
        segment_summary = await store.summaries.segment_summary(first.id)
        assert segment_summary is not None and TEA not in segment_summary.text
    assert files_holding(home.root, TEA) == []  # no log file, no database file holds the summary
    assert all(TEA not in text for _, text, _ in await logged(home))
    live = await dump_tables(home.database_file("klaw.db"))
    await reindex(home, engine_config("http://127.0.0.1:9/v1"))
    assert files_holding(home.root, TEA) == []
    rebuilt = await dump_tables(home.database_file("klaw.db"))
    assert [row[5] for row in rebuilt["summaries"]] == [row[5] for row in live["summaries"]]


async def test_reindex_rebuilds_the_same_summaries_and_vectors_without_calling_a_model(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **SUMMARIZING) as h:
        await turns(h)
        summary_calls = len(h.server.chat_requests)
        home = h.home
    assert summary_calls >= 6  # 3 turns, 3 exchange summaries, segment folds
    copy = KlawHome(tmp_path / "copy")
    shutil.copytree(home.root, copy.root)
    database = copy.database_file("klaw.db")
    live = await dump_tables(database)
    assert len(live["summaries"]) == 5 and len(live["vec_summaries"]) == 4  # the rolling one has no vector
    async with FakeOpenAiServer(default_reply=summarizing_reply) as counting:
        report = await reindex(copy, engine_config(counting.base_url))
        assert counting.chat_requests == []  # not one model call
    rebuilt = await dump_tables(database)
    assert rebuilt == live  # every table, summaries, their records and vectors included
    assert report.counts.exchanges == 3
    store = await SqliteStore.open(database)
    try:
        counts = await store.summaries.counts()
        assert (counts.exchanges, counts.segments_final, counts.segments_rolling, counts.vectors) == (3, 1, 1, 4)
        assert await store.summaries.pending_exchanges() == 0
    finally:
        await store.aclose()
