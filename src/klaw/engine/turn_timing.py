"""How long each phase of a turn took: always recorded, read by `klaw bench turn` and the inspector.

A turn's cost hides in its phases (the log's fsync, the exchange's records, each context layer, the
model, the reply), and a regression only shows where it is if every turn says how long each took.
The engine records this on every turn rather than a benchmark patching it in, so what the bench
measures is the code that runs; the cost is a `perf_counter` pair per phase (well under a
microsecond), the record a dict of a dozen floats kept with the turn's context record.
Why always on, and what the figures showed: docs/decisions/095-turn-cost-at-scale.md.

Phase names are dotted: `context.summary` is part of `context`, so a reader can show either level.
A phase timed twice in one turn (several tool-loop rounds) adds up. Phases are listed in the order they
start; two can overlap (a chat turn's exchange opening is written while its context is read), each
measured on its own, so the phases of a turn can add up to more than the turn.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseTimes:
    """Seconds per named phase of one turn, in the order the phases were first timed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.seconds.setdefault(name, 0.0)  # listed in the order phases start (two can overlap)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def merge(self, other: PhaseTimes, prefix: str = "") -> None:
        for name, seconds in other.seconds.items():
            self.add(prefix + name, seconds)

    def milliseconds(self) -> dict[str, float]:
        return {name: round(seconds * 1000, 3) for name, seconds in self.seconds.items()}
