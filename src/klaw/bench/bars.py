"""Latencies drawn as bars on one scale, beside their figures: a person sees at a glance which part
of a turn or a search dominates, which one varies, and how far a figure stands from its floor.

Each bar is solid to its p50 and shaded on to its p95 (a floor, one figure, is solid alone). The scale
is the largest p95 shown, but at most twice the largest p50 (one wild p95, a first call's, would
flatten every other bar): a bar cut at the scale ends in `›`. The heading names the scale. A dotted
row name is a part of the row above it and is indented. Plain block characters: they survive a pipe
and any terminal font.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rich.table import Table
from rich.text import Text

from klaw.bench.stats import Latency

SOLID = "\u2588"
SHADED = "\u2591"
CUT = "\u203a"


def latency_table(title: str, rows: Mapping[str, Latency], width: int = 32) -> Table:
    """`rows` in their order: name → latency (p50 and p95), each with a bar on the table's one scale."""
    finite = [row for row in rows.values() if math.isfinite(row.p50_ms) and math.isfinite(row.p95_ms)]
    scale = min(max((r.p95_ms for r in finite), default=0.0), 2 * max((r.p50_ms for r in finite), default=0.0))
    table = Table(title=title)
    for column in ("", "p50", "p95"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_column(f"p50 {SOLID} p95 {SHADED} (0\u2013{scale:.0f} ms)", no_wrap=True)
    for name, latency in rows.items():
        indent = "  " * name.count(".")
        table.add_row(
            indent + name.rsplit(".", 1)[-1],
            f"{latency.p50_ms:.2f}",
            f"{latency.p95_ms:.2f}",
            _bar(latency, scale, width),
        )
    return table


def floor(ms: float) -> Latency:
    """A floor (one computed figure) as a row: p50 and p95 both at it."""
    return Latency(ms, ms, 1)


def _bar(latency: Latency, scale: float, width: int) -> Text:
    if scale <= 0 or not (math.isfinite(latency.p50_ms) and math.isfinite(latency.p95_ms)):
        return Text("")  # a part nothing went through (count 0) has no bar
    solid = min(round(width * latency.p50_ms / scale), width)
    shaded = max(min(round(width * latency.p95_ms / scale), width) - solid, 0)
    cut = CUT if latency.p95_ms > scale else ""
    if cut:  # the mark takes the bar's last cell
        shaded, solid = (shaded - 1, solid) if shaded else (0, solid - 1)
    return Text.assemble((SOLID * solid, "cyan"), (SHADED * shaded, "cyan dim"), (cut, "bold"))
