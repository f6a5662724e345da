"""Accepting a record wakes the event loop once: a thread writes and fsyncs the log line and hands the
row to the database thread itself, whose answer is the one the loop waits for (decision 211). The
order is the log's, as before: when the line is fsync'd, no row of it exists yet; when accept
returns, both are there."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import pytest

from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("telegram", "42")


def record(text: str, role: Role = Role.USER) -> MessageRecord:
    return MessageRecord(CHAT, role, text, created_at=datetime.now(UTC))


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What a worker thread woke the event loop for while the test runs (each hop back to the loop)."""
    woken: list[str] = []
    real = asyncio.BaseEventLoop.call_soon_threadsafe

    def counting(self: asyncio.BaseEventLoop, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        woken.append(getattr(callback, "__qualname__", type(callback).__name__))
        return real(self, callback, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "call_soon_threadsafe", counting)
    return woken


async def test_a_record_is_logged_and_stored_in_one_hop(tmp_path: Path, hops: list[str]) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        ingestion = Ingestion(ConversationLog(tmp_path / "conversations"), store)
        await ingestion.accept(record("warm up: the chat's first row"))
        hops.clear()
        stored = await ingestion.accept(record("hello"))
        assert len(hops) == 1, hops
        together = await ingestion.accept_together([record("reply", Role.ASSISTANT), record("and more")])
        assert len(hops) == 2, hops
        assert await store.messages.get(stored.record.id) == stored
        assert [m.rowid for m in together] == [stored.rowid + 1, stored.rowid + 2]
    finally:
        await store.aclose()


async def test_the_line_is_durable_before_its_row_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the log's fsync the row is not in klaw.db (read by a second connection); at return it is."""
    store = await SqliteStore.open(tmp_path / "klaw.db")
    log = ConversationLog(tmp_path / "conversations")
    message = record("hello")
    rows_at_fsync: list[int] = []
    real_fsync = os.fsync

    def checking_fsync(fd: int) -> None:
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
            reader = apsw.Connection(str(tmp_path / "klaw.db"), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                found = reader.execute("SELECT count(*) FROM messages WHERE id = ?", (message.id,)).fetchone()
                rows_at_fsync.append(int(found[0]) if found else -1)
            finally:
                reader.close()

    try:
        await Ingestion(log, store).accept(record("warm up: the chat's first row"))
        monkeypatch.setattr(os, "fsync", checking_fsync)
        await Ingestion(log, store).accept(message)
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert rows_at_fsync == [0]
        assert (await store.messages.get(message.id)) is not None
        report = await log.read(log.files(log.chat_dir(CHAT)))
        assert [r.content for r in report.records][-1] == "hello"
    finally:
        await store.aclose()


async def test_a_log_that_fails_stores_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The line could not be made durable (here: fsync fails): nothing is stored, the error is the caller's."""
    store = await SqliteStore.open(tmp_path / "klaw.db")
    message = record("never acknowledged")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    try:
        ingestion = Ingestion(ConversationLog(tmp_path / "conversations"), store)
        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError, match="Input/output error"):
            await ingestion.accept(message)
        monkeypatch.undo()
        assert await store.messages.get(message.id) is None
        stored = await ingestion.accept(message)  # sent again: logged and stored now
        assert await store.messages.get(message.id) == stored
    finally:
        await store.aclose()
