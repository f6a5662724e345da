"""`exchanges` folded from exchange_open / exchange_close log records (store/sqlite/exchange_fold.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from klaw.store.exchange_records import ExchangeClose, exchange_close_record, exchange_open_record
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role

CHAT = ChatRef("console", "me")
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def test_open_then_close_builds_one_exchange_row(storage: Storage) -> None:
    user = await storage.messages.append(MessageRecord(CHAT, Role.USER, "hi", created_at=at(0)))
    opened = await storage.messages.append(exchange_open_record(CHAT, user.record.id, at(2)))
    [exchange] = await storage.exchanges.for_segment(opened.segment_id)
    assert (exchange.status, exchange.user_message_rowid) == (ExchangeStatus.OPEN, user.rowid)
    assert exchange.started_at == at(2)
    final = await storage.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "hello", created_at=at(3)))
    await storage.messages.append(
        exchange_close_record(opened.record, ExchangeStatus.COMPLETED, final.record.id, at(3))
    )
    [exchange] = await storage.exchanges.for_segment(opened.segment_id)
    assert exchange.status is ExchangeStatus.COMPLETED
    assert (exchange.final_message_rowid, exchange.ended_at) == (final.rowid, at(3))


async def test_failed_close_has_no_final_message_and_replay_changes_nothing(storage: Storage) -> None:
    user = await storage.messages.append(MessageRecord(CHAT, Role.USER, "hi", created_at=at(0)))
    opened = await storage.messages.append(exchange_open_record(CHAT, user.record.id, at(2)))
    close = exchange_close_record(opened.record, ExchangeStatus.FAILED, None, at(4))
    await storage.messages.append(close)
    for record in (user.record, opened.record, close):  # recovery replays the tail: idempotent on id
        await storage.messages.append(record)
    [exchange] = await storage.exchanges.for_segment(opened.segment_id)
    assert (exchange.status, exchange.final_message_rowid, exchange.ended_at) == (ExchangeStatus.FAILED, None, at(4))


async def test_control_records_stay_out_of_the_window(storage: Storage) -> None:
    user = await storage.messages.append(MessageRecord(CHAT, Role.USER, "hi", created_at=at(0)))
    opened = await storage.messages.append(exchange_open_record(CHAT, user.record.id, at(1)))
    await storage.messages.append(exchange_close_record(opened.record, ExchangeStatus.FAILED, None, at(1)))
    assert [m.record.id for m in await storage.messages.window(user.segment_id, 10)] == [user.record.id]
    assert await storage.messages.count_in_segment(user.segment_id) == 1
    assert MessageType.EXCHANGE_OPEN.is_control and MessageType.EXCHANGE_CLOSE.is_control


async def test_a_close_without_its_open_record_is_ignored(storage: Storage) -> None:
    orphan = exchange_open_record(CHAT, None, at(0))  # never appended (say, a torn log line)
    stored = await storage.messages.append(exchange_close_record(orphan, ExchangeStatus.COMPLETED, None, at(1)))
    assert await storage.exchanges.for_segment(stored.segment_id) == []


def test_close_record_metadata_is_read_tolerantly() -> None:
    bad = MessageRecord(CHAT, Role.SYSTEM, "", type=MessageType.EXCHANGE_CLOSE, metadata={"status": "open"})
    assert ExchangeClose.from_record(bad) is None
    with pytest.raises(ValueError, match="final status"):
        exchange_close_record(exchange_open_record(CHAT, None, at(0)), ExchangeStatus.OPEN, None, at(1))
