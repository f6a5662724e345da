"""A turn's writes are fenced by its chat's lease (docs/decisions/200-lease-fencing.md): two stores opened
on one real PostgreSQL database are two engines; the first stalls past its lease while the second takes
the chat, and its appends are then refused — the message, its log line and its folds alike."""

from __future__ import annotations

import asyncio

import pytest

from klaw.store.lease_fence import LeaseFence, LeaseLostError, fenced
from klaw.store.postgres.connection import Connection
from klaw.store.postgres.messages import PostgresMessages
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.conftest import StoreOpener
from tests.store.raw import rows

CHAT = ChatRef("console", "me")
OTHER = ChatRef("console", "other")


async def test_an_engine_that_stalled_past_its_lease_writes_nothing_to_the_chat_another_took(
    open_store: StoreOpener,
) -> None:
    first, second = await open_store(), await open_store()
    if first.leases is None or second.leases is None:
        return  # SQLite: one engine owns klaw.db, nothing to fence
    generation = await first.leases.acquire(CHAT, "a", 0.3)
    assert generation is not None
    with fenced(LeaseFence(CHAT, "a", generation)):
        await first.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "written while the lease holds"))
        await asyncio.sleep(0.4)  # a stalls: its lease expires
        taken = await second.leases.acquire(CHAT, "b", 30)
        assert taken is not None and taken > generation
        late = MessageRecord(CHAT, Role.ASSISTANT, "the stale reply")
        with pytest.raises(LeaseLostError, match="another engine took the chat"):
            await first.messages.append(late)
        with pytest.raises(LeaseLostError):
            await first.messages.append_many([MessageRecord(CHAT, Role.ASSISTANT, "and its close")])
        other = await first.messages.append(MessageRecord(OTHER, Role.USER, "another chat is not fenced"))
    with fenced(LeaseFence(CHAT, "b", taken)):
        await second.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "the answer of the engine holding it"))
    assert await first.messages.get(late.id) is None
    assert await rows(first, "SELECT 1 FROM log_records WHERE id = ?", late.id) == []
    assert other.record.chat == OTHER
    contents = [r[0] for r in await rows(first, "SELECT content FROM messages ORDER BY rowid")]
    assert contents == [
        "written while the lease holds",
        "another chat is not fenced",
        "the answer of the engine holding it",
    ]


async def test_an_expired_lease_no_one_took_still_writes_and_an_older_generation_does_not(
    open_store: StoreOpener,
) -> None:
    store = await open_store()
    if store.leases is None:
        return
    old = await store.leases.acquire(CHAT, "a", 0.2)
    assert old is not None
    with fenced(LeaseFence(CHAT, "a", old)):  # one turn, slow past its lease on a loaded machine
        await asyncio.sleep(0.3)
        await store.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "late, but nobody took the chat"))
        new = await store.leases.acquire(CHAT, "a", 30)  # taken again under the same holder name
        assert new is not None and new != old
        with pytest.raises(LeaseLostError):  # the lease of another generation is not the turn's
            await store.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "from the stalled turn"))
    later: list[asyncio.Task[object]] = []
    with fenced(LeaseFence(CHAT, "a", new)):
        await store.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "the next turn's reply"))
        gate = asyncio.Event()

        async def after_the_turn() -> None:
            await gate.wait()
            await store.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "a summary written after it"))

        later.append(asyncio.create_task(after_the_turn()))  # started by the turn, inherits its fence
    await store.leases.release(CHAT, "a")
    gate.set()
    await later[0]  # the block ended: what its tasks write afterwards is not the turn's
    contents = [r[0] for r in await rows(store, "SELECT content FROM messages ORDER BY rowid")]
    assert contents == ["late, but nobody took the chat", "the next turn's reply", "a summary written after it"]


async def test_a_takeover_waits_for_the_append_in_flight_and_then_finds_it(open_store: StoreOpener) -> None:
    """The append locks the lease row in its own read (decision 200): an engine taking the chat over
    while a reply is being stored waits for its commit, so it finds the chat answered."""
    first, second = await open_store(), await open_store()
    if not isinstance(first, PostgresStore) or first.leases is None or second.leases is None:
        return
    assert isinstance(first.messages, PostgresMessages)
    generation = await first.leases.acquire(CHAT, "a", 0.2)
    assert generation is not None
    reply = MessageRecord(CHAT, Role.ASSISTANT, "the reply in flight")
    with fenced(LeaseFence(CHAT, "a", generation)):
        async with first.db.transaction() as connection:
            await first.messages.append_in(connection, reply)
            await asyncio.sleep(0.3)  # the lease expires before the append commits
            takeover = asyncio.create_task(second.leases.acquire(CHAT, "b", 30))
            await asyncio.sleep(0.3)
            assert not takeover.done(), "the takeover did not wait for the append in flight"
    assert await takeover is not None
    assert await second.messages.get(reply.id) is not None


async def test_an_engine_stalled_inside_a_write_does_not_hold_up_the_engine_that_took_its_chat(
    open_store: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine stopped (SIGSTOP, a suspended machine) between two statements of an append holds the
    chat's advisory lock and its lease row: the server ends its idle transaction, so the engine taking the
    chat over is not held up for as long as the other stays stopped; woken, the stalled append finds the
    chat taken and is refused."""
    from klaw.store.postgres import store as postgres_store

    monkeypatch.setattr(postgres_store, "IDLE_IN_TRANSACTION_SECONDS", 1)
    first, second = await open_store(), await open_store()
    if not isinstance(first, PostgresStore) or second.leases is None:
        return
    generation = await first.leases.acquire(CHAT, "a", 0.3) if first.leases else None
    assert generation is not None
    inside, wake = asyncio.Event(), asyncio.Event()
    attempts = 0

    async def stalls_inside(connection: Connection) -> None:
        nonlocal attempts
        attempts += 1
        record = MessageRecord(CHAT, Role.ASSISTANT, f"the stale reply, try {attempts}")
        await first.messages.append_in(connection, record)
        if attempts == 1:  # the chat's lock and lease row held, then the engine stops
            inside.set()
            await wake.wait()
            await first.messages.append_in(connection, MessageRecord(CHAT, Role.ASSISTANT, "its close"))

    with fenced(LeaseFence(CHAT, "a", generation)):  # the stalled turn's block, still running
        stalled = asyncio.create_task(first.db.in_transaction(stalls_inside))
        await inside.wait()
        await asyncio.sleep(0.4)  # its lease expires
        async with asyncio.timeout(60):  # without the server's timeout: as long as the first stays stopped
            taken = await second.leases.acquire(CHAT, "b", 30)
            assert taken is not None
            with fenced(LeaseFence(CHAT, "b", taken)):
                await second.messages.append(MessageRecord(CHAT, Role.ASSISTANT, "the answer of the one holding it"))
        wake.set()
        with pytest.raises(LeaseLostError, match="another engine took the chat"):
            await stalled
    contents = [r[0] for r in await rows(first, "SELECT content FROM messages ORDER BY rowid")]
    assert contents == ["the answer of the one holding it"]
