"""The machine's memory bandwidth, measured with a numpy copy, so a scan's time can be set against
the physical floor: a search that reads B bytes cannot take less than B / bandwidth.

A copy of a 256 MB array (far beyond any cache) reads and writes each byte once; the figure is the
bytes moved (read + written) per second, the best of a few runs, on one thread and split over
`threads` threads (as the vector search splits a large chat)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

COPY_BYTES = 256 * 1024 * 1024
RUNS = 5


@dataclass(frozen=True)
class Bandwidth:
    one_thread_gb_s: float
    threads: int
    threaded_gb_s: float

    def floor_ms(self, scanned_bytes: int) -> float:
        """The least time reading `scanned_bytes` can take on `threads` threads."""
        return scanned_bytes / (self.threaded_gb_s * 1e9) * 1000


def measure_bandwidth(threads: int) -> Bandwidth:
    source = np.ones(COPY_BYTES // 8, dtype=np.float64)
    target = np.zeros_like(source)  # touched once, so no page faults are timed
    moved = 2 * source.nbytes
    bounds = np.linspace(0, len(source), max(1, threads) + 1).astype(int)

    def part(a: int, b: int) -> None:
        np.copyto(target[a:b], source[a:b])

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        one = _best(lambda: np.copyto(target, source))
        split = _best(lambda: list(pool.map(part, bounds[:-1], bounds[1:])))
    return Bandwidth(moved / one / 1e9, max(1, threads), moved / split / 1e9)


def _best(run: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)
