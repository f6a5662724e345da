"""`klaw bench locomo --backend sqlite --backend postgres`: the same run on each backend, one after
the other, so the recall of both comes from one command and can be set side by side.

Every backend's store is built from the same vectors: the first backend's embeddings of the turns are
kept in memory and handed to the next (`RememberingEmbedder`), so a difference in recall comes from
the store (its full text, its vector search), not from a model run twice, and the turns are embedded
once. Queries are embedded on every backend (their latency stays comparable). The report gives
both backends' headline figures in one table, then each backend's full report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from klaw.bench.locomo.dataset import LocomoDataset
from klaw.bench.locomo.metrics import HEADLINE_CATEGORIES
from klaw.bench.locomo.report import to_json as run_to_json
from klaw.bench.locomo.report import to_markdown as run_to_markdown
from klaw.bench.locomo.runner import LocomoRun, RunSettings, run_locomo
from klaw.bench.locomo.workbench import Workbench
from klaw.memory.embedder.protocol import Embedder, Vectors, WrappedEmbedder, embed_queries

HEADLINE_METRICS = (("r5", "R@5"), ("r10", "R@10"), ("mrr50", "MRR@50"))


@dataclass(frozen=True, slots=True)
class BackendRuns:
    """One `LocomoRun` per backend, in the order run."""

    runs: dict[str, LocomoRun]


class RememberingEmbedder(WrappedEmbedder):
    """`inner`'s vectors of stored texts, each text embedded once whatever the number of stores built."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._kept: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}

    async def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._kept))
        if missing:
            self._kept.update(zip(missing, await self._inner.embed(missing), strict=True))
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack([self._kept[t] for t in texts])

    async def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return await embed_queries(self._inner, texts)


async def run_on_backends(
    dataset: LocomoDataset, bench: Workbench, settings: dict[str, RunSettings]
) -> LocomoRun | BackendRuns:
    """One backend: its run, as `run_locomo` gives it. Several: each in turn, on the same vectors."""
    if len(settings) == 1:
        return await run_locomo(dataset, bench, next(iter(settings.values())))
    shared = replace(bench, embedder=RememberingEmbedder(bench.embedder))
    runs = {}
    for name, chosen in settings.items():
        directory = bench.work_dir / name
        directory.mkdir()
        runs[name] = await run_locomo(dataset, replace(shared, work_dir=directory), chosen)
    return BackendRuns(runs)


def to_json(result: LocomoRun | BackendRuns, **context: Any) -> dict[str, Any]:
    if isinstance(result, LocomoRun):
        return run_to_json(result, **context)
    return {"bench": "locomo", "backends": {name: run_to_json(run, **context) for name, run in result.runs.items()}}


def to_markdown(result: LocomoRun | BackendRuns) -> str:
    if isinstance(result, LocomoRun):
        return run_to_markdown(result)
    first = next(iter(result.runs.values()))
    labels = [label for _, label in HEADLINE_METRICS]
    lines = [
        f"# LoCoMo retrieval on {' and '.join(result.runs)}: categories"
        f" {', '.join(map(str, HEADLINE_CATEGORIES))}, the same vectors on each (figures in %)",
        "",
        "| variant | backend | " + " | ".join(labels) + " |",
        "|---|---|" + "---|" * len(labels),
    ]
    for variant in first.variants:
        for name, run in result.runs.items():
            means = run.variants[variant].summary.headline
            figures = [f"{100 * float(getattr(means, metric)):.1f}" for metric, _ in HEADLINE_METRICS]
            lines.append(f"| {variant} | {name} | " + " | ".join(figures) + " |")
    for name, run in result.runs.items():
        lines += ["", "---", "", f"On {name}:", "", run_to_markdown(run)]
    return "\n".join(lines)
