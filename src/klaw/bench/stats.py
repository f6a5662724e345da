"""Latency summaries shared by the benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Latency:
    """Milliseconds: median and 95th percentile over `count` samples."""

    p50_ms: float
    p95_ms: float
    count: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        if not seconds:
            return cls(float("nan"), float("nan"), 0)
        millis = np.asarray(seconds, dtype=np.float64) * 1000
        return cls(float(np.percentile(millis, 50)), float(np.percentile(millis, 95)), len(millis))

    def __str__(self) -> str:
        return f"p50 {self.p50_ms:.2f} ms, p95 {self.p95_ms:.2f} ms (n={self.count})"
