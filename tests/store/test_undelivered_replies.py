"""A closed exchange's final reply is kept as undelivered until it is confirmed, on both backends
(docs/decisions/101-reply-redelivery.md): the close's fold keeps it, `mark_delivered` drops it, a
forget takes it with the message, a failed turn keeps nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from klaw.store.archival_records import forget_record
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role
from tests.conftest import StoreOpener

CHAT = ChatRef("console", "me")
AT = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


async def turn(store: Storage, text: str, answer: str | None) -> tuple[MessageRecord, MessageRecord | None]:
    asked = MessageRecord(CHAT, Role.USER, text, created_at=AT)
    await store.messages.append(asked)
    opened = exchange_open_record(CHAT, asked.id, AT, await store.exchanges.reserve_id())
    await store.messages.append(opened)
    reply = None if answer is None else MessageRecord(CHAT, Role.ASSISTANT, answer, created_at=AT)
    if reply is not None:
        await store.messages.append(reply)
    status = ExchangeStatus.FAILED if reply is None else ExchangeStatus.COMPLETED
    await store.messages.append(exchange_close_record(opened, status, None if reply is None else reply.id, AT))
    return asked, reply


async def test_replies_wait_until_confirmed_and_go_with_a_forget(open_store: StoreOpener) -> None:
    store = await open_store()
    first_q, first = await turn(store, "first question", "first answer")
    await turn(store, "this turn failed", None)
    second_q, second = await turn(store, "second question", "second answer")
    assert first is not None and second is not None
    waiting = await store.exchanges.undelivered()
    assert [(w.reply.content, w.reply_to) for w in waiting] == [
        ("first answer", first_q.id),
        ("second answer", second_q.id),
    ]
    assert await store.exchanges.mark_delivered([first.id, "no-such-id"]) == 1
    assert [w.reply.id for w in await store.exchanges.undelivered()] == [second.id]
    await store.messages.append(forget_record(CHAT, [second_q.id, second.id], "exchange 3", ["2026-01-01"], AT))
    assert await store.exchanges.undelivered() == []
    assert await store.exchanges.mark_delivered([]) == 0


async def test_a_message_the_agent_sent_unasked_waits_too(open_store: StoreOpener) -> None:
    """A task's answer or a message from another chat (no exchange) is kept with no message it answers;
    an assistant message of any other source is not, and a user's never."""
    store = await open_store()
    task = MessageRecord(
        CHAT, Role.ASSISTANT, "Rain after five.", metadata={"source": "task", "task": "weather"}, created_at=AT
    )
    relayed = MessageRecord(
        CHAT, Role.ASSISTANT, "From the kitchen chat", metadata={"source": "message_send"}, created_at=AT
    )
    other = MessageRecord(CHAT, Role.ASSISTANT, "a note", metadata={"source": "import"}, created_at=AT)
    asked = MessageRecord(CHAT, Role.USER, "hi", metadata={"source": "task"}, created_at=AT)
    for record in (task, relayed, other, asked):
        await store.messages.append(record)
    assert [(w.reply.id, w.reply_to) for w in await store.exchanges.undelivered()] == [
        (task.id, None),
        (relayed.id, None),
    ]
    assert await store.exchanges.mark_delivered([task.id, relayed.id]) == 2
    assert await store.exchanges.undelivered() == []
