"""Exchanges waiting for a shared summary request (memory/summaries/exchange_batches.py), across many
segments at once: each waits once, in its own segment, and leaves only its own segment when removed
(the lookup by id of decision 288 must keep what the walk over every segment gave)."""

from __future__ import annotations

import functools
import random
from datetime import UTC, datetime, timedelta

from klaw.memory.summaries.exchange_batches import ExchangeBatches
from klaw.store.records import ChatRef, Exchange, ExchangeStatus

START = datetime(2026, 1, 1, tzinfo=UTC)


def _exchange(exchange_id: int, segment_id: int) -> Exchange:
    started = START + timedelta(seconds=exchange_id)
    return Exchange(exchange_id, ChatRef("test", f"c{segment_id}"), segment_id, started, ExchangeStatus.COMPLETED, None)


def _due(batches: ExchangeBatches, segment_id: int) -> list[int]:
    batch = batches.due(segment_id, closed=True, now=START)
    return [] if batch is None else [w.exchange.id for w in batch]


def test_fifty_segments_each_keep_their_own_exchanges_once_and_lose_only_those_removed() -> None:
    batches = ExchangeBatches(most=10, wait_seconds=60, max_tokens=10_000)
    for exchange_id in range(1, 201):
        batches.add(_exchange(exchange_id, segment_id=exchange_id % 50), tokens=10)
        batches.add(_exchange(exchange_id, segment_id=exchange_id % 50), tokens=10)  # again: still once
    assert all(exchange_id in batches for exchange_id in range(1, 201)) and 201 not in batches
    assert _due(batches, 7) == [7, 57, 107, 157]

    for exchange_id in (7, 107, 999):  # 999 never waited: nothing happens
        batches.remove(exchange_id)
    assert _due(batches, 7) == [57, 157] and 7 not in batches and 57 in batches
    assert _due(batches, 8) == [8, 58, 108, 158]

    for exchange_id in (57, 157):
        batches.remove(exchange_id)
    assert (
        7 not in batches.segments() and len(batches.segments()) == 49 and batches.due(7, closed=True, now=START) is None
    )
    batches.add(_exchange(7, segment_id=7), tokens=10)  # removed, it can wait again
    assert _due(batches, 7) == [7] and 7 in batches.segments() and batches.segments()[0] == 1  # lowest id first


def test_an_exchange_asked_alone_goes_alone_and_is_forgotten_with_it() -> None:
    batches = ExchangeBatches(most=10, wait_seconds=60, max_tokens=10_000)
    for exchange_id in (1, 2, 3):
        batches.add(_exchange(exchange_id, segment_id=1), tokens=10)
    batches.ask_alone([1])
    assert _due(batches, 1) == [1]
    batches.remove(1)
    assert _due(batches, 1) == [2, 3]


def _walked(batches: ExchangeBatches, still_open: set[int], now: datetime) -> list[int] | None:
    """The batch the summarizer took before decision 507: every segment in `segments` order, `due` on each."""
    for segment_id in batches.segments():
        batch = batches.due(segment_id, closed=segment_id not in still_open, now=now)
        if batch is not None:
            return [w.exchange.id for w in batch]
    return None


def _turn_of(set_back: dict[int, int], exchange_id: int) -> int:
    return set_back.get(exchange_id, 0)


def test_the_next_batch_due_is_the_one_the_walk_over_every_segment_found() -> None:
    """`next_due` (one pass, decision 507) against the walk it replaced, over 300 mixes of 60 segments: closed
    or open, full, long, waited out, set back after a failure, asked alone, some removed."""
    rng = random.Random(507)
    for _ in range(300):
        set_back: dict[int, int] = {}
        batches = ExchangeBatches(most=6, wait_seconds=600, max_tokens=1000, turn=functools.partial(_turn_of, set_back))
        ids = rng.sample(range(1, 5000), rng.choice((60, 240)))
        for exchange_id in ids:
            segment_id = rng.randrange(60)
            started = START + timedelta(seconds=rng.randrange(1200))
            exchange = Exchange(
                exchange_id, ChatRef("t", f"c{segment_id}"), segment_id, started, ExchangeStatus.COMPLETED, None
            )
            batches.add(exchange, tokens=rng.choice((10, 20, 90)))
        for exchange_id in rng.sample(ids, rng.randrange(40)):  # summarized, or forgotten: its totals go with it
            batches.remove(exchange_id)
        ids = [exchange_id for exchange_id in ids if exchange_id in batches]
        for exchange_id in rng.sample(ids, rng.randrange(4)):
            set_back[exchange_id] = rng.randrange(1, 4)
        batches.ask_alone(rng.sample(ids, rng.choice((0, 0, 1, 2))))
        segments = batches.waiting_in()
        assert sorted(segments) == sorted(batches.segments())
        still_open = {s for s in segments if rng.random() < 0.99}
        now = START + timedelta(seconds=rng.choice((0, 900, 1700)))
        expected = _walked(batches, still_open, now)
        batch = batches.next_due(still_open, now=now)
        assert (None if batch is None else [w.exchange.id for w in batch]) == expected
