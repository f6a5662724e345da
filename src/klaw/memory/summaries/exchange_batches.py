"""Finished exchanges waiting to share one summary request, and when they stop waiting.

One request per exchange made summaries the largest part of a chat's model calls (a second call for
every turn, on a small machine with a local model). Exchanges of one segment are therefore
summarized together: a segment's waiting exchanges are *due* once `most` of them wait, or their
text fills `max_tokens` (long exchanges batch less, short ones more), or the oldest has waited
`wait_seconds` (a quiet chat still gets its summaries), or the segment is closed (the final segment
summary and the past conversations wait for them). A batch takes them oldest first while they fit
both limits; an exchange too long to share goes alone (cut as it always was), and so does one a
batch answer left out (`ask_alone`).

This is memory only: what waits is an exchange without a summary in the database, found again by
the summarizer's scan after a restart, so a crash loses no summary, only the wait so far.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from klaw.store.records import Exchange


@dataclass(frozen=True, slots=True)
class Waiting:
    exchange: Exchange
    tokens: int  # its question and final reply, approximately

    @property
    def finished_at(self) -> datetime:
        return self.exchange.ended_at or self.exchange.started_at


class ExchangeBatches:
    def __init__(
        self, *, most: int, wait_seconds: float, max_tokens: int, turn: Callable[[int], int] = lambda _: 0
    ) -> None:
        """`turn(exchange id)` orders the waiting: 0, or later for one whose request failed, which then
        waits behind the others (`BackgroundWorker.turn`), in its segment and among segments."""
        self._turn = turn
        self._most = most
        self._wait = timedelta(seconds=wait_seconds)
        self._max_tokens = max_tokens
        self._by_segment: dict[int, list[Waiting]] = {}
        # Each waiting exchange's segment: whether one waits, and where, without walking every segment's
        # list (with 50 chats at once that walk was ~200 comparisons a turn on the event loop, decision 288).
        self._segment_of: dict[int, int] = {}
        self._alone: set[int] = set()
        # Each segment's waiting tokens and its earliest finish, kept with its list: whether a segment can be due
        # at all is then known without a walk over its exchanges (`next_due`, decision 507). Only a filter: the
        # exact rule runs on any segment it lets through, and a removal only lowers the tokens and moves the
        # earliest finish later, so totals behind a removal would let more through, never fewer.
        self._totals: dict[int, tuple[int, datetime]] = {}

    def __contains__(self, exchange_id: object) -> bool:
        return exchange_id in self._segment_of

    def add(self, exchange: Exchange, tokens: int) -> None:
        if exchange.id not in self._segment_of:
            self._segment_of[exchange.id] = exchange.segment_id
            waiting = Waiting(exchange, tokens)
            self._by_segment.setdefault(exchange.segment_id, []).append(waiting)
            total, earliest = self._totals.get(exchange.segment_id, (0, waiting.finished_at))
            self._totals[exchange.segment_id] = (total + tokens, min(earliest, waiting.finished_at))

    def remove(self, exchange_id: int) -> None:
        self._alone.discard(exchange_id)
        segment_id = self._segment_of.pop(exchange_id, None)
        if segment_id is None:
            return
        waiting = self._by_segment[segment_id]
        waiting[:] = [w for w in waiting if w.exchange.id != exchange_id]
        if not waiting:
            del self._by_segment[segment_id]
            del self._totals[segment_id]
        else:
            self._totals[segment_id] = (sum(w.tokens for w in waiting), min(w.finished_at for w in waiting))

    def ask_alone(self, exchange_ids: Iterable[int]) -> None:
        """These go alone, at once: a batch answer left them out, or the batch was rejected."""
        self._alone.update(exchange_ids)

    def _key(self, waiting: Waiting) -> tuple[int, int]:
        return self._turn(waiting.exchange.id), waiting.exchange.id

    def waiting_in(self) -> list[int]:
        """The segments with waiting exchanges, in no order (what `next_due` needs told which are open)."""
        return list(self._by_segment)

    def next_due(self, still_open: Container[int], *, now: datetime) -> list[Waiting] | None:
        """The next batch due, from the segment waiting longest (its first exchange the least by `turn`, then
        id) among those due; None when none is. What a walk over every segment in that order gave, in one pass: a
        segment that cannot be due (open, short, light, its earliest finish within the wait, none asked alone)
        is passed over from its kept totals, the first of the others found once, no list sorted but the one
        taken. With many chats each waiting for a batch, the sort of every segment and of each one's list was
        the summarizer's cost on the event loop after every exchange, growing with the chats (decision 507).
        `still_open`: the open ones among `waiting_in`."""
        best: tuple[tuple[int, int], list[Waiting]] | None = None
        totals = self._totals
        for segment_id, waiting in self._by_segment.items():
            tokens, earliest = totals[segment_id]
            if not (
                segment_id not in still_open
                or len(waiting) >= self._most
                or tokens >= self._max_tokens
                or now - earliest >= self._wait
                or (self._alone and any(w.exchange.id in self._alone for w in waiting))
            ):
                continue  # not due whichever of its exchanges comes first (`_ready` asks of that one only)
            first = min(waiting, key=self._key)
            key = self._key(first)
            if best is not None and key >= best[0]:
                continue  # due or not, it comes after the one found
            if self._ready(waiting, first, closed=segment_id not in still_open, now=now):
                best = (key, waiting)
        if best is None:
            return None
        waiting = best[1]
        waiting.sort(key=self._key)
        return self._take(waiting)

    def _ready(self, waiting: list[Waiting], first: Waiting, *, closed: bool, now: datetime) -> bool:
        return (
            closed
            or len(waiting) >= self._most
            or sum(w.tokens for w in waiting) >= self._max_tokens
            or now - first.finished_at >= self._wait
            or first.exchange.id in self._alone
        )

    def _take(self, waiting: list[Waiting]) -> list[Waiting]:
        first = waiting[0]
        batch, total = [first], first.tokens
        if first.exchange.id in self._alone:
            return batch
        for item in waiting[1:]:
            if len(batch) >= self._most or item.exchange.id in self._alone or total + item.tokens > self._max_tokens:
                break
            batch.append(item)
            total += item.tokens
        return batch
