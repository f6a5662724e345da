"""Exchanges waiting for a shared summary request (memory/summaries/exchange_batches.py), across many
segments at once: each waits once, in its own segment, and leaves only its own segment when removed
(the lookup by id of decision 288 must keep what the walk over every segment gave)."""

from __future__ import annotations

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
