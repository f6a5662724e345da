"""Exchanges waiting for a shared summary request (memory/summaries/exchange_batches.py), across many
segments at once: each waits once, in its own segment, and leaves only its own segment when removed
(the lookup by id of decision 288 must keep what the walk over every segment gave)."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from klaw.memory.summaries.exchange_batches import ExchangeBatches
from klaw.store.records import ChatRef, Exchange, ExchangeStatus

START = datetime(2026, 1, 1, tzinfo=UTC)
MOST, WAIT, MAX_TOKENS = 6, timedelta(seconds=600), 1000  # the mixes' batches


def _exchange(exchange_id: int, segment_id: int) -> Exchange:
    started = START + timedelta(seconds=exchange_id)
    return Exchange(exchange_id, ChatRef("test", f"c{segment_id}"), segment_id, started, ExchangeStatus.COMPLETED, None)


def _due(batches: ExchangeBatches, segment_id: int) -> list[int]:
    """The batch of `segment_id` closed, every other segment open (none of them due: none fills a batch or
    waited out its time at START)."""
    batch = batches.next_due(set(batches.waiting_in()) - {segment_id}, now=START)
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
    assert 7 not in batches.waiting_in() and len(batches.waiting_in()) == 49 and _due(batches, 7) == []
    batches.add(_exchange(7, segment_id=7), tokens=10)  # removed, it can wait again
    assert _due(batches, 7) == [7] and 7 in batches.waiting_in()
    first = batches.next_due(set(), now=START)  # every segment closed: the one waiting longest (lowest id) first
    assert first is not None and [w.exchange.id for w in first] == [1, 51, 101, 151]


def test_an_exchange_asked_alone_goes_alone_and_is_forgotten_with_it() -> None:
    batches = ExchangeBatches(most=10, wait_seconds=60, max_tokens=10_000)
    for exchange_id in (1, 2, 3):
        batches.add(_exchange(exchange_id, segment_id=1), tokens=10)
    batches.ask_alone([1])
    assert _due(batches, 1) == [1]
    batches.remove(1)
    assert _due(batches, 1) == [2, 3]


@dataclass(frozen=True)
class _Kept:
    """What the test added and has not removed: the reference walk below reads this, not the batches' state."""

    segment_id: int
    started: datetime
    tokens: int


def _walked(
    kept: dict[int, _Kept], alone: set[int], turn: Callable[[int], int], still_open: set[int], now: datetime
) -> list[int] | None:
    """The batch the summarizer took before decision 507, from the rule as docs and the module say it: every
    segment, the one whose first exchange is least by (turn, id) first; the first of them due (closed, `MOST`
    waiting, `MAX_TOKENS` of text, its first exchange waited `WAIT` out, or asked alone) gives its batch: its
    exchanges in that order while they fit both limits, one asked alone going by itself. This walk was
    ExchangeBatches.segments() and .due() until decision 521 moved it here, the only place it served."""
    by_segment: dict[int, list[int]] = {}
    for exchange_id, one in kept.items():
        by_segment.setdefault(one.segment_id, []).append(exchange_id)

    def key(exchange_id: int) -> tuple[int, int]:
        return turn(exchange_id), exchange_id

    for segment_id in sorted(by_segment, key=lambda s: min(map(key, by_segment[s]))):
        waiting = sorted(by_segment[segment_id], key=key)
        first = waiting[0]
        due = (
            segment_id not in still_open
            or len(waiting) >= MOST
            or sum(kept[e].tokens for e in waiting) >= MAX_TOKENS
            or now - kept[first].started >= WAIT
            or first in alone
        )
        if not due:
            continue
        batch, total = [first], kept[first].tokens
        if first in alone:
            return batch
        for exchange_id in waiting[1:]:
            if len(batch) >= MOST or exchange_id in alone or total + kept[exchange_id].tokens > MAX_TOKENS:
                break
            batch.append(exchange_id)
            total += kept[exchange_id].tokens
        return batch
    return None


def _turn_of(set_back: dict[int, int], exchange_id: int) -> int:
    return set_back.get(exchange_id, 0)


def test_the_next_batch_due_is_the_one_the_walk_over_every_segment_found() -> None:
    """`next_due` (one pass, decision 507) against the walk it replaced, over 300 mixes of 60 segments: closed
    or open, full, long, waited out, set back after a failure, asked alone, some removed."""
    rng = random.Random(507)
    for _ in range(300):
        set_back: dict[int, int] = {}
        turn = functools.partial(_turn_of, set_back)
        batches = ExchangeBatches(most=MOST, wait_seconds=WAIT.total_seconds(), max_tokens=MAX_TOKENS, turn=turn)
        kept: dict[int, _Kept] = {}
        ids = rng.sample(range(1, 5000), rng.choice((60, 240)))
        for exchange_id in ids:
            segment_id = rng.randrange(60)
            started = START + timedelta(seconds=rng.randrange(1200))
            exchange = Exchange(
                exchange_id, ChatRef("t", f"c{segment_id}"), segment_id, started, ExchangeStatus.COMPLETED, None
            )
            tokens = rng.choice((10, 20, 90))
            batches.add(exchange, tokens=tokens)
            kept[exchange_id] = _Kept(segment_id, started, tokens)
        for exchange_id in rng.sample(ids, rng.randrange(40)):  # summarized, or forgotten: its totals go with it
            batches.remove(exchange_id)
            del kept[exchange_id]
        ids = [exchange_id for exchange_id in ids if exchange_id in batches]
        assert sorted(ids) == sorted(kept)
        for exchange_id in rng.sample(ids, rng.randrange(4)):
            set_back[exchange_id] = rng.randrange(1, 4)
        alone = set(rng.sample(ids, rng.choice((0, 0, 1, 2))))
        batches.ask_alone(alone)
        segments = batches.waiting_in()
        assert sorted(segments) == sorted({waiting.segment_id for waiting in kept.values()})
        still_open = {s for s in segments if rng.random() < 0.99}
        now = START + timedelta(seconds=rng.choice((0, 900, 1700)))
        expected = _walked(kept, alone, turn, still_open, now)
        batch = batches.next_due(still_open, now=now)
        assert (None if batch is None else [w.exchange.id for w in batch]) == expected
