"""`klaw reindex` (ReindexServiceTest, docs/decisions/009-carried-over-requirements.md; plus resumability,
malformed lines, the engine check and settings): a log on disk, a real SQLite file with sqlite-vec,
FakeEmbedder (dim 32)."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from klaw.config import EngineConfig
from klaw.engine.clock import ManualClock
from klaw.engine_presence import engine_answers
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.protocol import EmbedderError, Vectors
from klaw.memory.reindex import EngineRunningError, ReindexStage, reindex
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore
from tests.memory.table_dump import dump_tables

CHAT = ChatRef("console", "me")
OTHER = ChatRef("telegram", "42")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
LONG_USER = "tell me everything you know about the old lighthouse keeper on the northern island"
LONG_REPLY = "the lighthouse keeper kept a diary of every storm that passed the northern island"
SHORT = "ok thanks"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def config(**overrides: Any) -> EngineConfig:
    data: dict[str, Any] = {"embedder": {"backend": "fake", "dim": 32}}
    for section, values in overrides.items():
        data.setdefault(section, {}).update(values)
    return EngineConfig.model_validate(data)


def record(text: str, minutes: float, role: Role = Role.USER, chat: ChatRef = CHAT, **kw: Any) -> MessageRecord:
    return MessageRecord(chat, role, text, created_at=at(minutes), **kw)


def a_conversation() -> list[MessageRecord]:
    """User text, a tool call and result, a long and a short reply, an exchange, /new, /model, two days."""
    user = record(LONG_USER, 0, id="user-1")
    opened = exchange_open_record(CHAT, "user-1", at(1))
    call = record(
        "checking the diary for the keeper on the northern island right now",
        1,
        Role.ASSISTANT,
        type=MessageType.TOOL_CALL,
        metadata={"tool_calls": [{"id": "c1", "name": "file_read", "arguments": "{}"}]},
        id="call-1",
    )
    result = record(
        "diary of the lighthouse keeper: storms, ships and the northern island",
        1,
        Role.TOOL,
        type=MessageType.TOOL_RESULT,
        metadata={"tool_call_id": "c1", "name": "file_read", "is_error": False},
        id="result-1",
    )
    reply = record(LONG_REPLY, 1, Role.ASSISTANT, id="reply-1")
    closed = exchange_close_record(opened, ExchangeStatus.COMPLETED, "reply-1", at(1))
    return [
        user,
        opened,
        call,
        result,
        reply,
        closed,
        record(SHORT, 2, id="short-1"),
        record("", 3, Role.SYSTEM, type=MessageType.MODEL_SWITCH, metadata={"model": "x/large"}),
        record("", 4, Role.SYSTEM, type=MessageType.SESSION_BREAK),
        record("a new day and a new question about the southern harbour and its boats", 60 * 24, id="user-2"),
        record("the southern harbour shelters forty fishing boats in winter storms", 10, chat=OTHER, id="other-1"),
    ]


async def write_log(home: KlawHome, records: Sequence[MessageRecord]) -> None:
    await ConversationLog(home.conversations).append_many(records)


async def vectored_ids(home: KlawHome, cfg: EngineConfig) -> set[str]:
    store = await SqliteStore.open(home.database_file(cfg.database.path))
    try:
        rowids = await store.db.run(lambda c: [row[0] for row in c.execute("SELECT rowid FROM vec_messages")])
        return {m.record.id for m in await store.messages.by_rowids(rowids)}
    finally:
        await store.aclose()


@pytest.fixture
def klaw_home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    home.root.mkdir()
    return home


async def test_reindex_embeds_eligible_user_and_assistant_text(klaw_home: KlawHome) -> None:
    cfg = config()
    await write_log(klaw_home, a_conversation())
    report = await reindex(klaw_home, cfg)
    assert await vectored_ids(klaw_home, cfg) == {"user-1", "reply-1", "user-2", "other-1"}
    assert report.counts.vectors == report.embedded == 4
    assert (report.counts.messages, report.counts.control_records) == (7, 4)
    assert (report.counts.chats, report.counts.segments, report.counts.sessions) == (2, 3, 1)
    assert report.counts.exchanges == 1
    assert report.counts.embedding_pending == report.counts.embedding_failed == 0


async def test_reindex_skips_assistant_tool_call_messages(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())
    await reindex(klaw_home, config())
    assert "call-1" not in await vectored_ids(klaw_home, config())


async def test_reindex_skips_tool_role_messages(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())
    await reindex(klaw_home, config())
    assert "result-1" not in await vectored_ids(klaw_home, config())


async def test_reindex_skips_messages_below_min_message_tokens(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())
    await reindex(klaw_home, config())
    assert "short-1" not in await vectored_ids(klaw_home, config())
    strict = config(autoRag={"minMessageTokens": 500})
    await reindex(klaw_home, strict)
    assert await vectored_ids(klaw_home, strict) == set()


async def test_reindex_clears_old_vectors_before_rebuild(klaw_home: KlawHome) -> None:
    """Vectors of another embedder (and of messages no longer eligible) do not survive: reindex is
    how the embedder is switched."""
    cfg = config()
    await write_log(klaw_home, a_conversation())
    old = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        stored = await old.messages.append_many(a_conversation())
        await old.vectors.bind_embedder("another-model", 32)
        await old.vectors.put([(m.rowid, np.ones(32, dtype=np.float32) / np.sqrt(32)) for m in stored])
        assert await old.vectors.count() == len(stored)
    finally:
        await old.aclose()
    report = await reindex(klaw_home, cfg)
    assert report.counts.vectors == 4
    store = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        meta = await store.db.run(lambda c: c.execute("SELECT DISTINCT embedder_id, dim FROM index_meta").fetchall())
        assert [tuple(row) for row in meta] == [("fake-hash-32", 32)]  # every vector table: the new embedder
        hits = await store.search.nearest(CHAT, (await FakeEmbedder(32).embed([LONG_USER]))[0], limit=1)
        assert hits[0].message.record.id == "user-1" and hits[0].score < 1e-4
    finally:
        await store.aclose()


async def test_reindex_progress_callback_reports_the_vector_steps(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())
    calls: list[tuple[ReindexStage, int, int]] = []
    await reindex(klaw_home, config(embedder={"batchSize": 1}), progress=lambda s, d, t: calls.append((s, d, t)))
    embed = [(done, total) for stage, done, total in calls if stage is ReindexStage.EMBED]
    assert embed[0] == (0, 4) and embed[-1] == (4, 4)
    assert [done for done, _ in embed] == [0, 1, 2, 3, 4]
    read = [(done, total) for stage, done, total in calls if stage is ReindexStage.READ]
    assert read[-1] == (3, 3)  # console day 1, console day 2, telegram day 1
    rebuild = [(done, total) for stage, done, total in calls if stage is ReindexStage.REBUILD]
    assert rebuild[-1] == (11, 11)


class PoisonedEmbedder(FakeEmbedder):
    """Fails any batch holding a text about the southern harbour."""

    def __init__(self) -> None:
        super().__init__(32)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if any("southern" in text for text in texts):
            raise EmbedderError("the embedding server rejected the batch (HTTP 400)")
        return await super().embed(texts)


async def test_reindex_continues_after_an_individual_embed_failure(klaw_home: KlawHome) -> None:
    cfg = config(embedder={"batchSize": 1})
    await write_log(klaw_home, a_conversation())
    report = await reindex(klaw_home, cfg, embedder=PoisonedEmbedder(), clock=ManualClock(T0))
    assert await vectored_ids(klaw_home, cfg) == {"user-1", "reply-1"}
    assert report.embedded == 2
    assert report.counts.embedding_pending + report.counts.embedding_failed == 2  # kept: the engine retries
    assert report.counts.embedding_errors == (("EmbedderError: the embedding server rejected the batch (HTTP 400)", 2),)


async def test_malformed_and_torn_lines_are_skipped_counted_and_reported(klaw_home: KlawHome) -> None:
    records = a_conversation()
    await write_log(klaw_home, records[:3])
    day_file = ConversationLog(klaw_home.conversations).file_for(records[0])
    with open(day_file, "ab") as handle:
        handle.write(b'{"not": "a record"}\nnot json at all\n\xff\xfe\n')
    await write_log(klaw_home, records[3:])
    with open(day_file, "ab") as handle:
        handle.write(b'{"id": "torn", "channel": "con')  # a crash mid-write
    report = await reindex(klaw_home, config())
    assert report.malformed == 4
    assert [(path, line) for path, line, _ in report.malformed_lines] == [
        (day_file, 4),
        (day_file, 5),
        (day_file, 6),
        (day_file, 13),
    ]
    assert all("lighthouse" not in reason for _, _, reason in report.malformed_lines)
    assert report.counts.messages == 7 and report.counts.vectors == 4


async def test_refuses_while_the_engine_socket_answers(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_unix_server(accept, path=str(klaw_home.socket_path))
    try:
        with pytest.raises(EngineRunningError, match="stop it"):
            await reindex(klaw_home, config())
    finally:
        server.close()
        await server.wait_closed()
    assert not klaw_home.database_file("klaw.db").exists()
    klaw_home.socket_path.unlink(missing_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(klaw_home.socket_path))  # a socket file nobody listens on, as a crashed engine leaves
    stale.close()
    assert klaw_home.socket_path.exists() and not await engine_answers(klaw_home.socket_path)
    report = await reindex(klaw_home, config())
    assert report.counts.messages == 7


async def test_settings_survive_a_reindex(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())
    old = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        await old.settings.set("summarizer", {"enabled": False, "model": "x/large"})
    finally:
        await old.aclose()
    report = await reindex(klaw_home, config())
    assert report.settings_copied == 1
    store = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        assert await store.settings.get("summarizer") == {"enabled": False, "model": "x/large"}
    finally:
        await store.aclose()


async def test_the_hours_message_sends_survive_a_reindex(klaw_home: KlawHome) -> None:
    """`tools.messageSendsPerChatPerHour` counts the store's `sends` (decision 418), which the log does not
    hold: a reindex reset the cap (decision 435)."""
    from klaw.store.records import ChatRef

    await write_log(klaw_home, a_conversation())
    now = datetime.now(UTC)
    old = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        assert (await old.sends.reserve(ChatRef("telegram", "42"), now, 1)).place is not None
    finally:
        await old.aclose()
    await reindex(klaw_home, config())
    store = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        full = await store.sends.reserve(ChatRef("telegram", "42"), now, 1)
        assert (full.place, full.in_hour) == (None, 1)  # the hour's send is still counted
    finally:
        await store.aclose()


async def test_the_old_database_is_replaced_and_only_kept_on_request(klaw_home: KlawHome) -> None:
    await write_log(klaw_home, a_conversation())
    live = klaw_home.database_file("klaw.db")
    await reindex(klaw_home, config())
    siblings = sorted(p.name for p in live.parent.iterdir() if p.name.startswith("klaw.db"))
    assert siblings == ["klaw.db", "klaw.db.floats", "klaw.db.floats-rowids"]  # the build's float rows (534)
    report = await reindex(klaw_home, config(), keep_backup=True)
    assert report.backup is not None and report.backup.name.startswith("klaw.db.bak-") and report.backup.exists()
    # what a person asked to keep stays: a second kept one is another file, a plain run removes neither
    second = await reindex(klaw_home, config(), keep_backup=True)
    assert second.backup is not None and second.backup != report.backup
    assert (await reindex(klaw_home, config())).backup is None
    assert report.backup.exists() and second.backup.exists()
    siblings = sorted(p.name for p in live.parent.iterdir() if p.name.startswith("klaw.db"))
    floats = ["klaw.db.floats", "klaw.db.floats-rowids"]  # the last build's; a kept backup fills its own again
    assert siblings == sorted(["klaw.db", *floats, report.backup.name, second.backup.name])


class Interrupted(FakeEmbedder):
    """Stands for Ctrl-C during the embedding stage."""

    def __init__(self) -> None:
        super().__init__(32)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        raise KeyboardInterrupt


async def test_an_interrupted_reindex_resumes_and_matches_an_uninterrupted_one(tmp_path: Path) -> None:
    cfg = config(embedder={"batchSize": 2})
    straight, resumed = KlawHome(tmp_path / "straight"), KlawHome(tmp_path / "resumed")
    records = a_conversation()
    for home in (straight, resumed):
        home.root.mkdir()
        await write_log(home, records)
    await reindex(straight, cfg)

    with pytest.raises(KeyboardInterrupt):
        await reindex(resumed, cfg, embedder=Interrupted())
    assert not resumed.database_file("klaw.db").exists()  # the live file is untouched until the end
    assert resumed.database_file("klaw.db.reindex").exists()

    calls: list[tuple[ReindexStage, int, int]] = []
    report = await reindex(resumed, cfg, progress=lambda s, d, t: calls.append((s, d, t)))
    assert report.resumed_files == report.log_files == 3 and report.records == 0
    assert report.embedded == report.counts.vectors == 4
    assert await dump_tables(resumed.database_file("klaw.db")) == await dump_tables(straight.database_file("klaw.db"))


async def test_a_run_interrupted_mid_rebuild_resumes_and_new_log_lines_are_picked_up(tmp_path: Path) -> None:
    cfg = config()
    straight, resumed = KlawHome(tmp_path / "straight"), KlawHome(tmp_path / "resumed")
    records = a_conversation()
    next_day = next(r for r in records if r.id == "user-2")
    for home in (straight, resumed):
        home.root.mkdir()
        await write_log(home, [r for r in records if r is not next_day])

    def stop_after_first_day(stage: ReindexStage, done: int, total: int) -> None:
        if stage is ReindexStage.READ and done == 2:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        await reindex(resumed, cfg, progress=stop_after_first_day)
    for home in (straight, resumed):  # an engine ran in between and logged more
        await write_log(home, [next_day])
    await reindex(straight, cfg)
    report = await reindex(resumed, cfg)
    assert (report.resumed_files, report.log_files, report.records) == (2, 3, 1)
    assert await dump_tables(resumed.database_file("klaw.db")) == await dump_tables(straight.database_file("klaw.db"))


async def test_reindexing_a_reindexed_database_changes_nothing(klaw_home: KlawHome) -> None:
    """Idempotent: a second full run over an unchanged log rebuilds every table row for row, rowids,
    vectors and settings included (the maintenance guide: running it twice is always safe)."""
    cfg = config()
    await write_log(klaw_home, a_conversation())
    old = await SqliteStore.open(klaw_home.database_file("klaw.db"))
    try:
        await old.settings.set("rag", {"enabled": False})
    finally:
        await old.aclose()
    first = await reindex(klaw_home, cfg)
    once = await dump_tables(klaw_home.database_file("klaw.db"))
    second = await reindex(klaw_home, cfg)
    assert await dump_tables(klaw_home.database_file("klaw.db")) == once
    assert (second.records, second.embedded, second.settings_copied) == (first.records, 4, 1)
    assert second.counts == first.counts
    assert len(once["vec_messages"]) == 4 and len(once["settings"]) == 1


async def test_reindex_of_a_home_without_a_log_gives_an_empty_database(klaw_home: KlawHome) -> None:
    report = await reindex(klaw_home, config())
    assert (report.log_files, report.counts.messages, report.counts.vectors) == (0, 0, 0)
    assert klaw_home.database_file("klaw.db").exists()


async def test_a_log_file_edited_by_hand_since_the_interruption_starts_the_build_over(tmp_path: Path) -> None:
    cfg = config()
    straight, resumed = KlawHome(tmp_path / "straight"), KlawHome(tmp_path / "resumed")
    records = a_conversation()
    for home in (straight, resumed):
        home.root.mkdir()
        await write_log(home, records)

    def stop_after_first_day(stage: ReindexStage, done: int, total: int) -> None:
        if stage is ReindexStage.READ and done == 2:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        await reindex(resumed, cfg, progress=stop_after_first_day)
    for home in (straight, resumed):  # someone deletes the short message's line
        day_file = ConversationLog(home.conversations).file_for(records[0])
        lines = day_file.read_text(encoding="utf-8").splitlines(keepends=True)
        day_file.write_text("".join(line for line in lines if '"short-1"' not in line), encoding="utf-8")
    await reindex(straight, cfg)
    report = await reindex(resumed, cfg)
    assert report.resumed_files == 0 and any("started over" in warning for warning in report.warnings)
    assert await dump_tables(resumed.database_file("klaw.db")) == await dump_tables(straight.database_file("klaw.db"))


async def test_settings_only_in_the_old_wal_are_kept_and_no_stale_wal_survives(klaw_home: KlawHome) -> None:
    """An engine that crashed leaves committed data in klaw.db-wal: it is read, then moved away with
    the old file, never left beside the new one (SQLite would apply it to the wrong database)."""
    await write_log(klaw_home, a_conversation())
    live = klaw_home.database_file("klaw.db")
    scratch = klaw_home.root / "scratch"
    scratch.mkdir()
    connection = apsw.Connection(str(scratch / "klaw.db"))
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    connection.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at INTEGER)")
    connection.execute("INSERT INTO settings VALUES ('rag', '{\"topK\": 5}', 1)")
    for suffix in ("", "-wal"):  # a copy taken while the "engine" still runs = the state after a crash
        shutil.copy(scratch / f"klaw.db{suffix}", live.with_name(f"klaw.db{suffix}"))
    connection.close()
    live.with_name("klaw.db-shm").unlink(missing_ok=True)
    report = await reindex(klaw_home, config())
    assert report.settings_copied == 1
    assert not live.with_name("klaw.db-wal").exists()
    store = await SqliteStore.open(live)
    try:
        assert await store.settings.get("rag") == {"topK": 5}
        assert (await store.messages.get("user-1")) is not None
    finally:
        await store.aclose()
