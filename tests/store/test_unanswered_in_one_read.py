"""Every chat's unanswered messages in one read, on both backends (decision 477): the same messages as
asking chat by chat (`answered_elsewhere.unanswered`, which resuming did for every chat at each start)."""

from __future__ import annotations

from datetime import UTC, datetime

from klaw.engine.answered_elsewhere import unanswered
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from tests.conftest import StoreOpener

AT = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


async def said(store: Storage, chat: ChatRef, text: str) -> MessageRecord:
    record = MessageRecord(chat, Role.USER, text, created_at=AT)
    await store.messages.append(record)
    return record


async def turn(store: Storage, asked: MessageRecord, status: ExchangeStatus | None) -> None:
    """An exchange answering `asked`: closed with `status`, or left open (None: a crash cut it off)."""
    opened = exchange_open_record(asked.chat, asked.id, AT, await store.exchanges.reserve_id())
    await store.messages.append(opened)
    if status is None:
        return
    reply = MessageRecord(asked.chat, Role.ASSISTANT, "an answer", created_at=AT)
    await store.messages.append(reply)
    final = None if status is ExchangeStatus.FAILED else reply.id
    await store.messages.append(exchange_close_record(opened, status, final, AT))


async def test_unanswered_of_every_chat_in_one_read(open_store: StoreOpener) -> None:
    store = await open_store()
    answered, later, cut, failed, renewed, idle = (ChatRef("web", name) for name in "abcdef")
    await turn(store, await said(store, answered, "answered"), ExchangeStatus.COMPLETED)
    await turn(store, await said(store, later, "answered first"), ExchangeStatus.COMPLETED)
    waiting = [await said(store, later, "then this"), await said(store, later, "and this")]
    await turn(store, await said(store, cut, "answered"), ExchangeStatus.COMPLETED)
    cut_off = await said(store, cut, "cut off mid-turn")
    await turn(store, cut_off, None)
    interrupted = await said(store, cut, "and one more")
    await turn(store, await said(store, failed, "the turn failed"), ExchangeStatus.FAILED)
    await said(store, renewed, "before /new")  # its segment ended: not this segment's to answer
    await store.messages.append(MessageRecord(renewed, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=AT))
    fresh = await said(store, renewed, "after /new")
    await store.segments.current(idle)  # a chat with an open segment and nothing in it

    found = await store.messages.unanswered()

    expected = {later: waiting, cut: [cut_off, interrupted], renewed: [fresh]}
    by_chat: dict[ChatRef, list[str]] = {}
    for message in found:
        by_chat.setdefault(message.record.chat, []).append(message.record.id)
    assert by_chat == {chat: [m.id for m in records] for chat, records in expected.items()}
    for chat in (answered, later, cut, failed, renewed, idle):  # what asking chat by chat finds
        assert [m.record.id for m in await unanswered(store, chat)] == by_chat.get(chat, [])
    assert [m.rowid for m in found if m.record.chat == later] == sorted(
        m.rowid for m in found if m.record.chat == later
    )
