"""`message_send`'s places per target chat in the store (docs/decisions/418-durable-send-counts.md), on both
backends: the hour's count survives reopening, two stores on one database (two engines, or two
processes on one klaw.db) reserving at once never take more places than the cap, a place given back
frees, and a place an hour old no longer counts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from klaw.store.records import ChatRef, utc_now
from tests.conftest import StoreOpener
from tests.store.raw import rows

TARGET = ChatRef("telegram", "42")
OTHER = ChatRef("web", "main")


async def test_the_hours_places_survive_reopening_the_store(open_store: StoreOpener) -> None:
    store = await open_store()
    start = utc_now()
    for minute in range(3):
        assert (await store.sends.reserve(TARGET, start + timedelta(minutes=minute), 3)).place is not None
    await store.aclose()

    again = await open_store()
    refused = await again.sends.reserve(TARGET, start + timedelta(minutes=10), 3)
    assert refused.place is None and refused.in_hour == 3
    assert refused.oldest is not None and abs(refused.oldest - start) < timedelta(milliseconds=1)
    assert (await again.sends.reserve(OTHER, start + timedelta(minutes=10), 3)).place is not None  # per target
    freed = await again.sends.reserve(TARGET, start + timedelta(minutes=60, milliseconds=1), 3)
    assert freed.place is not None and freed.in_hour == 2  # the first is an hour old
    assert len(await rows(again, "SELECT id FROM sends WHERE target = 'telegram:42'")) == 3  # the old row pruned


async def test_reservations_at_once_from_two_stores_take_at_most_the_cap(open_store: StoreOpener) -> None:
    first, second = await open_store(), await open_store()
    now = utc_now()
    places = await asyncio.gather(*(store.sends.reserve(TARGET, now, 4) for store in [first, second] * 10))
    taken = [p for p in places if p.place is not None]
    assert len(taken) == 4
    assert sorted(p.in_hour for p in taken) == [0, 1, 2, 3]  # each counted the ones before it
    assert all(p.in_hour == 4 for p in places if p.place is None)


async def test_a_place_given_back_no_longer_counts(open_store: StoreOpener) -> None:
    store = await open_store()
    now = utc_now()
    first = await store.sends.reserve(TARGET, now, 2)
    await store.sends.reserve(TARGET, now, 2)
    assert (await store.sends.reserve(TARGET, now, 2)).place is None
    assert first.place is not None
    await store.sends.give_back(first.place)
    assert (await store.sends.reserve(TARGET, now, 2)).place is not None


async def test_places_taken_while_the_clock_ran_ahead_count_from_when_it_was_set_right(open_store: StoreOpener) -> None:
    """adversary21: two sends with the clock a year ahead, then the clock set right: the target was refused
    "for 525540 minutes", and the count held for as long as the clock had been ahead. Such places count as
    taken when the clock came back: refused within that hour, free after it."""
    store = await open_store()
    now = utc_now()
    for _ in range(2):
        assert (await store.sends.reserve(TARGET, now + timedelta(days=365), 2)).place is not None
    refused = await store.sends.reserve(TARGET, now, 2)
    assert refused.place is None and refused.in_hour == 2
    assert refused.oldest is not None and abs(refused.oldest - now) < timedelta(milliseconds=1)
    assert (await store.sends.reserve(TARGET, now + timedelta(hours=1, seconds=1), 2)).place is not None
