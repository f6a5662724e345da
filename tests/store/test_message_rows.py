"""A `messages` row read back is the record that was written (store/shared/rows.py): the mapping sets
the dataclasses' slots itself (decision 273), so it must name every field they have, and what it
builds must equal, field by field (and by hash where the record has one), what their `__init__`
builds from the same values."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, StoredMessage
from klaw.store.shared.rows import MESSAGE_RECORD_FIELDS, STORED_MESSAGE_FIELDS
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("telegram", "42/../x y")
T0 = datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)


def test_the_mapping_names_every_field_of_the_record_and_the_message() -> None:
    assert tuple(f.name for f in fields(MessageRecord)) == MESSAGE_RECORD_FIELDS
    assert tuple(f.name for f in fields(StoredMessage)) == STORED_MESSAGE_FIELDS


async def test_messages_read_back_equal_the_records_written(tmp_path: Path) -> None:
    records = [
        MessageRecord(CHAT, Role.USER, "hello", created_at=T0),
        MessageRecord(
            CHAT, Role.ASSISTANT, "hi, with metadata", created_at=T0 + timedelta(seconds=1), metadata={"k": [1, "v"]}
        ),
        MessageRecord(
            CHAT, Role.ASSISTANT, '{"call": 1}', type=MessageType.TOOL_CALL, created_at=T0 + timedelta(seconds=2)
        ),
        MessageRecord(CHAT, Role.TOOL, "result", type=MessageType.TOOL_RESULT, created_at=T0 + timedelta(seconds=3)),
    ]
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        stored = await store.messages.append_many(records)
        read = await store.messages.by_rowids([m.rowid for m in stored])
    finally:
        await store.aclose()
    assert len(read) == len(records)
    for message, record, written in zip(sorted(read, key=lambda m: m.rowid), records, stored, strict=True):
        built = StoredMessage(rowid=written.rowid, segment_id=written.segment_id, record=record)
        assert message == built
        if record.metadata is None:  # a dict is not hashable, in either
            assert hash(message) == hash(built)
        assert all(getattr(message.record, f.name) == getattr(record, f.name) for f in fields(MessageRecord))
