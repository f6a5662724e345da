"""ManualClock, the time every engine test runs on: sleepers wake in deadline order only when a test
advances time, and a test can wait for a sleep it cannot see start."""

from __future__ import annotations

import asyncio

from klaw.engine.clock import ManualClock


async def test_sleepers_wake_in_deadline_order_only_when_time_passes_their_deadline() -> None:
    clock = ManualClock()
    woken: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woken.append(seconds)

    tasks = [asyncio.create_task(sleeper(s)) for s in (3, 1, 2)]
    await clock.advance(1.5)
    assert woken == [1]
    await clock.advance(5)
    assert woken == [1, 2, 3]
    await asyncio.gather(*tasks)


async def test_wait_for_sleeper_returns_once_a_sleep_of_that_length_begins() -> None:
    clock = ManualClock()
    other = asyncio.create_task(clock.sleep(5))
    waiter = asyncio.create_task(clock.wait_for_sleeper(25))
    await clock.advance(0)
    assert not waiter.done()  # a sleep of another length does not count
    sleeping = asyncio.create_task(clock.sleep(25))
    async with asyncio.timeout(10):
        await waiter
    async with asyncio.timeout(10):
        await clock.wait_for_sleeper(25)  # already asleep: at once
    await clock.advance(25)
    await asyncio.gather(other, sleeping)
    waiter = asyncio.create_task(clock.wait_for_sleeper(25))
    await clock.advance(0)
    assert not waiter.done()  # a finished sleep does not count either
    waiter.cancel()
