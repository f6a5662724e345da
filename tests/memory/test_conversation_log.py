"""The conversation log: durable JSONL appends, tolerant reads, and recovery into the store."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("telegram", "42")
T0 = datetime(2026, 3, 1, 23, 59, 0, 123000, tzinfo=UTC)


def record(text: str, seconds: int = 0, chat: ChatRef = CHAT) -> MessageRecord:
    return MessageRecord(chat=chat, role=Role.USER, content=text, created_at=T0 + timedelta(seconds=seconds))


async def test_records_go_to_one_file_per_chat_and_utc_day(tmp_path: Path) -> None:
    log = ConversationLog(tmp_path)
    await log.append(record("before midnight"))
    await log.append(record("after midnight", 120))
    files = log.files(log.chat_dir(CHAT))
    assert [f.name for f in files] == ["2026-03-01.jsonl", "2026-03-02.jsonl"]
    assert log.chat_dir(CHAT).name == "telegram_42"
    line = json.loads(files[0].read_text(encoding="utf-8"))
    assert line["content"] == "before midnight"
    assert line["created_at"] == "2026-03-01T23:59:00.123Z"


async def test_round_trip_preserves_every_field(tmp_path: Path) -> None:
    log = ConversationLog(tmp_path)
    original = MessageRecord(
        chat=ChatRef("web", "user/../../etc"),
        role=Role.ASSISTANT,
        content='multi\nline "quoted" ünïcode 🙂',
        type=MessageType.TOOL_CALL,
        created_at=T0,
        metadata={"tool_calls": [{"id": "c1", "name": "x", "arguments": "{}"}]},
    )
    await log.append(original)
    chat_dir = log.chat_dir(original.chat)
    assert chat_dir.parent == tmp_path  # a hostile chat id cannot escape conversations/
    report = await log.read(log.files(chat_dir))
    assert report.records == [original]
    assert report.skipped == []


async def test_append_is_fsynced_before_returning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    await ConversationLog(tmp_path).append(record("durable"))
    assert synced, "append returned without fsync"


async def test_malformed_lines_are_skipped_with_file_and_line_not_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = ConversationLog(tmp_path)
    await log.append(record("first"))
    path = log.files(log.chat_dir(CHAT))[0]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("{not json SECRET-TEXT\n")
        handle.write('{"id": "x", "content": "SECRET-TEXT"}\n')
        handle.write(
            '{"id":"y","channel":"telegram","chat_id":"42","role":"robot","type":"text",'
            '"content":"SECRET-TEXT","created_at":"2026-03-01T00:00:00Z"}\n'
        )
        handle.write("\n")
    await log.append(record("last", 1))
    # the logger's own level too: `klaw reindex` run in this process (a CLI test) sets it to ERROR
    with caplog.at_level(logging.WARNING, logger="klaw.memory.conversation_log"):
        report = await log.read([path])
    assert [r.content for r in report.records] == ["first", "last"]
    assert [(n, reason.split(" ")[0]) for _, n, reason in report.skipped] == [
        (2, "invalid"),
        (3, "missing"),
        (4, "unknown"),
    ]
    assert "SECRET-TEXT" not in caplog.text
    assert f"{path}:2" in caplog.text


async def test_a_torn_last_line_does_not_swallow_the_next_append(tmp_path: Path) -> None:
    log = ConversationLog(tmp_path)
    await log.append(record("complete"))
    path = log.files(log.chat_dir(CHAT))[0]
    with open(path, "ab") as handle:
        handle.write(b'{"id":"torn","chann')  # the process died mid-write
    await log.append(record("after the crash", 1))
    report = await log.read([path])
    assert [r.content for r in report.records] == ["complete", "after the crash"]
    assert len(report.skipped) == 1


async def test_crash_between_log_and_database_loses_nothing(tmp_path: Path) -> None:
    """The log wins: a message logged but never inserted is recovered at the next start."""
    log = ConversationLog(tmp_path / "conversations")
    store = await SqliteStore.open(tmp_path / "klaw.db")
    ingestion = Ingestion(log, store)
    await ingestion.accept(record("stored normally", 0))
    await log.append(record("logged, then the process died", 1))  # no database insert
    await log.append(record("another chat, never inserted", 2, ChatRef("console", "bob")))
    await store.aclose()

    reopened = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        recovered = await Ingestion(log, reopened).recover()
        assert recovered == 2
        segment = await reopened.segments.current(CHAT)
        window = await reopened.messages.window(segment.id, 10)
        assert [m.content for m in window] == ["stored normally", "logged, then the process died"]
        assert await Ingestion(log, reopened).recover() == 0  # idempotent
    finally:
        await reopened.aclose()


async def test_recovery_rebuilds_a_lost_database_including_segments(tmp_path: Path) -> None:
    log = ConversationLog(tmp_path / "conversations")
    await log.append(record("first topic", 0))
    await log.append(
        MessageRecord(CHAT, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0 + timedelta(seconds=1))
    )
    await log.append(record("second topic", 2))
    store = await SqliteStore.open(tmp_path / "fresh.db")
    try:
        assert await Ingestion(log, store).recover() == 3
        segments = await store.segments.list(CHAT)
        assert len(segments) == 2
        window = await store.messages.window(segments[-1].id, 10)
        assert [m.content for m in window] == ["second topic"]
    finally:
        await store.aclose()


async def test_time_is_utc_milliseconds_so_a_record_equals_itself_after_the_log_and_the_database(
    tmp_path: Path, store: SqliteStore
) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    original = MessageRecord(CHAT, Role.USER, "hello", created_at=datetime(2026, 7, 1, 0, 30, 0, 123456, tzinfo=india))
    assert original.created_at.utcoffset() == timedelta(0)
    assert (original.created_at.day, original.created_at.hour, original.created_at.microsecond) == (30, 19, 123000)
    log = ConversationLog(tmp_path / "conversations")
    await log.append(original)
    [day_file] = log.files(log.chat_dir(CHAT))
    assert day_file.name == "2026-06-30.jsonl"  # the UTC day, not the sender's
    [from_log] = (await log.read([day_file])).records
    assert from_log == original and from_log.created_at.utcoffset() == timedelta(0)
    await store.messages.append(from_log)
    from_database = await store.messages.get(original.id)
    assert from_database is not None and from_database.record == original
    assert from_database.record.created_at.utcoffset() == timedelta(0)
    with pytest.raises(ValueError, match="timezone-aware"):
        MessageRecord(CHAT, Role.USER, "naive", created_at=datetime(2026, 7, 1, 0, 30))


async def test_a_record_accepted_once_is_neither_logged_nor_stored_twice(tmp_path: Path) -> None:
    """A gateway resends a message it is not sure reached the engine: the same id is accepted once."""
    log = ConversationLog(tmp_path / "conversations")
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        ingestion = Ingestion(log, store)
        first = record("hello", 0)
        stored, new = await ingestion.accept_once(first)
        resent = dataclasses.replace(record("hello, resent", 1), id=first.id)
        again, new_again = await ingestion.accept_once(resent)
        assert (new, new_again) == (True, False)
        assert again == stored and again.content == "hello"
        assert await ingestion.stored(first.id) == stored
        assert await ingestion.stored(None) is None
        report = await log.read(log.files(log.chat_dir(CHAT)))
        assert [r.content for r in report.records] == ["hello"]
    finally:
        await store.aclose()
