"""What a store several engines share gives them (docs/decisions/170-chat-leases.md, 132): chat leases,
embedding jobs claimed once, and the log kept in the database. Two stores opened on one database are
two engines; SQLite, owned by one process, has no leases and keeps its log in files."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from klaw.engine.clock import ManualClock
from klaw.store.archival_records import forget_record
from klaw.store.log_format import decode_record
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, Role, utc_now
from tests.conftest import StoreOpener
from tests.store.raw import is_postgres, rows

CHAT = ChatRef("console", "me")
OTHER = ChatRef("console", "other")
HOUR = timedelta(hours=1)


async def test_a_chat_lease_is_one_engines_until_released_or_expired(open_store: StoreOpener) -> None:
    first, second = await open_store(), await open_store()
    if not is_postgres(first):
        assert first.leases is None and not first.keeps_log  # one process owns klaw.db
        return
    assert first.leases is not None and second.leases is not None
    assert await first.leases.acquire(CHAT, "a", 30)
    assert await first.leases.acquire(CHAT, "a", 30)  # extended by its holder
    assert not await second.leases.acquire(CHAT, "b", 30)
    assert await second.leases.acquire(OTHER, "b", 30)  # another chat is free
    await first.leases.release(CHAT, "a")
    assert await second.leases.acquire(CHAT, "b", 0.2)
    assert await second.leases.renew([CHAT, OTHER], "b", 0.2) == set()
    await asyncio.sleep(0.3)  # b died: its leases expire on the server's clock
    assert await first.leases.acquire(CHAT, "a", 30)
    assert await second.leases.renew([CHAT], "b", 30) == {CHAT}  # b learns it lost the chat
    await first.leases.release_all("a")
    assert await second.leases.acquire(CHAT, "b", 30)


async def test_unserved_chats_are_those_with_an_unanswered_message_and_no_other_engines_lease(
    open_store: StoreOpener,
) -> None:
    store = await open_store()
    if store.leases is None:
        return
    await store.messages.append(MessageRecord(CHAT, Role.USER, "is anyone there?"))
    await store.messages.append(MessageRecord(OTHER, Role.USER, "hello"))
    now = utc_now()
    assert await store.leases.unserved(now - HOUR, now + HOUR, "a") == [CHAT, OTHER]
    assert await store.leases.unserved(now + timedelta(minutes=1), now + HOUR, "a") == []  # too recent
    assert await store.leases.acquire(OTHER, "b", 30)
    assert await store.leases.unserved(now - HOUR, now + HOUR, "a") == [CHAT]  # b serves the other
    assert await store.leases.unserved(now - HOUR, now + HOUR, "b") == [CHAT, OTHER]  # its own still count


async def test_a_job_claimed_by_one_engine_is_not_due_for_another(open_store: StoreOpener) -> None:
    clock = ManualClock()
    first, second = await open_store(clock=clock.now), await open_store(clock=clock.now)
    stored = await first.messages.append(MessageRecord(CHAT, Role.USER, "remember the milk"), embed=True)
    [job] = await first.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=2))
    assert job.target_rowid == stored.rowid
    if not is_postgres(first):
        return  # one engine: nobody to claim from
    assert await second.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=2)) == []
    later = clock.now() + timedelta(minutes=2)
    [again] = await second.embedding_jobs.claim(later, 10, timedelta(minutes=2))  # the first engine died
    assert again.id == job.id


async def test_the_log_is_kept_in_the_database_and_forgetting_removes_its_lines(storage: Storage) -> None:
    if not storage.keeps_log:
        return
    kept = await storage.messages.append(MessageRecord(CHAT, Role.USER, "the weather is fine\x00"))
    # A word, not digits: the tombstone line holds ids and a timestamp, whose digits once held "4711".
    gone = await storage.messages.append(MessageRecord(CHAT, Role.USER, "my locker code is quokka"))
    lines = await rows(storage, "SELECT id, line FROM log_records ORDER BY seq")
    assert [decode_record(line) for _, line in lines] == [kept.record, gone.record]  # NUL kept in the line
    tombstone = forget_record(CHAT, [gone.record.id], "message", [], utc_now())
    await storage.messages.append(tombstone)
    assert [row[0] for row in await rows(storage, "SELECT id FROM log_records ORDER BY seq")] == [
        kept.record.id,
        tombstone.id,
    ]
    assert await rows(storage, "SELECT 1 FROM log_records WHERE line LIKE ?", "%quokka%") == []
