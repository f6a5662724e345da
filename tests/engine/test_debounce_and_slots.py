"""Debounce (DebounceTest) and priority rate limiting (RateLimitingTest;
docs/decisions/009-carried-over-requirements.md), on a manual clock."""

from __future__ import annotations

import asyncio

from klaw.engine.clock import ManualClock, settle
from klaw.engine.debounce import Debouncer
from klaw.engine.slots import LlmSlots, Priority


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []

    async def __call__(self, key: str, items: list[str]) -> None:
        self.batches.append((key, items))


async def test_single_message_processed_after_debounce() -> None:
    clock, seen = ManualClock(), Recorder()
    debouncer = Debouncer(1.5, seen, clock)
    debouncer.add("chat", "hello")
    await clock.advance(1.49)
    assert seen.batches == []
    await clock.advance(0.01)
    assert seen.batches == [("chat", ["hello"])]


async def test_multiple_messages_from_same_chat_merged_in_order() -> None:
    clock, seen = ManualClock(), Recorder()
    debouncer = Debouncer(1.5, seen, clock)
    for text in ("one", "two", "three"):
        debouncer.add("chat", text)
        await clock.advance(0.5)
    await clock.advance(1.5)
    assert seen.batches == [("chat", ["one", "two", "three"])]


async def test_timer_restarts_on_new_message() -> None:
    clock, seen = ManualClock(), Recorder()
    debouncer = Debouncer(1.5, seen, clock)
    debouncer.add("chat", "a")
    await clock.advance(1.0)
    debouncer.add("chat", "b")
    await clock.advance(1.0)  # 2.0 s after "a", 1.0 s after "b"
    assert seen.batches == []
    await clock.advance(0.5)
    assert seen.batches == [("chat", ["a", "b"])]


async def test_chats_are_independent() -> None:
    clock, seen = ManualClock(), Recorder()
    debouncer = Debouncer(1.5, seen, clock)
    debouncer.add("alice", "a1")
    await clock.advance(1.0)
    debouncer.add("bob", "b1")
    await clock.advance(0.5)
    assert seen.batches == [("alice", ["a1"])]
    await clock.advance(1.0)
    assert seen.batches == [("alice", ["a1"]), ("bob", ["b1"])]


async def test_flush_all_delivers_everything_pending_now() -> None:
    clock, seen = ManualClock(), Recorder()
    debouncer = Debouncer(1.5, seen, clock)
    debouncer.add("alice", "a")
    debouncer.add("bob", "b")
    await debouncer.flush_all()
    assert sorted(seen.batches) == [("alice", ["a"]), ("bob", ["b"])]
    await clock.advance(5)
    assert len(seen.batches) == 2


async def test_max_concurrent_llm_limit_respected() -> None:
    slots = LlmSlots(2)
    release = asyncio.Event()
    running: list[int] = []
    peak = 0

    async def call(n: int) -> None:
        nonlocal peak
        async with slots.hold(Priority.INTERACTIVE):
            running.append(n)
            peak = max(peak, len(running))
            await release.wait()
            running.remove(n)

    tasks = [asyncio.create_task(call(n)) for n in range(5)]
    await settle()
    assert slots.in_use == 2
    assert slots.queue_depth == 3
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2
    assert slots.in_use == 0


async def test_interactive_requests_get_priority_over_subagents() -> None:
    slots = LlmSlots(2)
    gate = asyncio.Event()
    order: list[str] = []

    async def hold_slot() -> None:
        async with slots.hold(Priority.INTERACTIVE):
            await gate.wait()

    async def waiter(name: str, priority: Priority, done: asyncio.Event) -> None:
        async with slots.hold(priority):
            order.append(name)
            await done.wait()

    holders = [asyncio.create_task(hold_slot()) for _ in range(2)]
    await settle()
    finish = asyncio.Event()
    # Subagents queue first; interactive turns arrive later but must be served first.
    queued = [
        asyncio.create_task(waiter("sub-1", Priority.SUBAGENT, finish)),
        asyncio.create_task(waiter("sub-2", Priority.SUBAGENT, finish)),
    ]
    await settle()
    queued += [
        asyncio.create_task(waiter("chat-1", Priority.INTERACTIVE, finish)),
        asyncio.create_task(waiter("chat-2", Priority.INTERACTIVE, finish)),
    ]
    await settle()
    assert slots.queue_depth == 4
    gate.set()  # both in-flight calls finish; they were never interrupted
    await settle()
    assert order == ["chat-1", "chat-2"]
    finish.set()
    await asyncio.gather(*holders, *queued)
    assert order == ["chat-1", "chat-2", "sub-1", "sub-2"]
    assert slots.in_use == 0


async def test_a_cancelled_waiter_does_not_leak_a_slot() -> None:
    slots = LlmSlots(1)
    gate = asyncio.Event()

    async def hold() -> None:
        async with slots.hold(Priority.INTERACTIVE):
            await gate.wait()

    holder = asyncio.create_task(hold())
    await settle()
    waiter = asyncio.create_task(hold())
    await settle()
    waiter.cancel()
    gate.set()
    await holder
    await asyncio.gather(waiter, return_exceptions=True)
    assert slots.in_use == 0
    async with slots.hold(Priority.SUBAGENT):
        assert slots.in_use == 1


async def test_one_slot_is_kept_for_people_s_turns() -> None:
    slots = LlmSlots(2)
    gate = asyncio.Event()
    holding: list[str] = []

    async def hold(name: str, priority: Priority) -> None:
        async with slots.hold(priority):
            holding.append(name)
            await gate.wait()

    background = [
        asyncio.create_task(hold("sub", Priority.SUBAGENT)),
        asyncio.create_task(hold("summary", Priority.BACKGROUND)),
    ]
    await settle()
    assert holding == ["sub"] and slots.queue_depth == 1  # the second slot is kept
    chat = asyncio.create_task(hold("chat", Priority.INTERACTIVE))
    await settle()
    assert holding == ["sub", "chat"]  # a person's turn takes the kept slot at once
    gate.set()
    await asyncio.gather(*background, chat)
    assert holding == ["sub", "chat", "summary"] and (slots.in_use, slots.queue_depth) == (0, 0)
