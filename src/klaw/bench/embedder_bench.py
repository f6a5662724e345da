"""Embedder throughput and latency, for `klaw bench embed`.

Two numbers matter for klaw: sentences/s at a large batch size (how fast a memory backlog is
indexed) and the latency of a single short text (every retrieval embeds its query first). The
benchmark text is generated, not downloaded, so the benchmark runs offline and gives the same
input on every machine; only the timings differ.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from klaw.config import EmbedderConfig
from klaw.memory.embedder.factory import create_embedder
from klaw.memory.embedder.minilm import Runtime
from klaw.memory.embedder.protocol import Embedder

LOCAL_RUNTIMES: tuple[Runtime, ...] = ("numpy", "onnx-fp32", "onnx-int8")


@dataclass(frozen=True, slots=True)
class BatchMeasurement:
    """Timings for embedding all benchmark texts in calls of `batch_size` texts."""

    batch_size: int
    calls: int
    sentences: int
    seconds: float
    sentences_per_second: float
    ms_per_call_p50: float
    ms_per_call_p95: float


@dataclass(frozen=True, slots=True)
class EmbedderBenchResult:
    """One benchmark run. `warmup_ms` is the first call, which includes any lazy model load."""

    model_id: str
    dim: int
    texts: int
    mean_words: float
    warmup_ms: float
    batches: tuple[BatchMeasurement, ...]

    def for_batch_size(self, batch_size: int) -> BatchMeasurement:
        for measurement in self.batches:
            if measurement.batch_size == batch_size:
                return measurement
        raise KeyError(batch_size)


async def measure_embedder(
    embedder: Embedder,
    *,
    texts: Sequence[str],
    batch_sizes: Sequence[int] = (1, 64),
    progress: Callable[[int], None] | None = None,
) -> EmbedderBenchResult:
    """Embed all `texts` once per batch size, timing every call.

    A warm-up call comes first so model loading and first-call allocations don't count. With batch
    size 1 the per-call percentiles are single-sentence latencies. `progress`, if given, is called
    after every call with the number of texts that call embedded (an increment: the total over the
    run is `len(texts) * len(batch_sizes)`), e.g. to advance a progress bar.
    """
    if not texts:
        raise ValueError("texts must not be empty")
    if not batch_sizes or min(batch_sizes) < 1:
        raise ValueError("batch sizes must be >= 1")
    items = list(texts)

    start = time.perf_counter()
    await embedder.embed(items[: max(batch_sizes)])
    warmup_ms = (time.perf_counter() - start) * 1000

    measurements = []
    for batch_size in batch_sizes:
        durations: list[float] = []
        for offset in range(0, len(items), batch_size):
            chunk = items[offset : offset + batch_size]
            call_start = time.perf_counter()
            await embedder.embed(chunk)
            durations.append(time.perf_counter() - call_start)
            if progress is not None:
                progress(len(chunk))
        total = sum(durations)
        ms = np.asarray(durations) * 1000
        measurements.append(
            BatchMeasurement(
                batch_size=batch_size,
                calls=len(durations),
                sentences=len(items),
                seconds=total,
                sentences_per_second=len(items) / total if total > 0 else float("inf"),
                ms_per_call_p50=float(np.percentile(ms, 50)),
                ms_per_call_p95=float(np.percentile(ms, 95)),
            )
        )
    return EmbedderBenchResult(
        model_id=embedder.model_id,
        dim=embedder.dim,
        texts=len(items),
        mean_words=sum(len(t.split()) for t in items) / len(items),
        warmup_ms=warmup_ms,
        batches=tuple(measurements),
    )


def compared_embedders(
    config: EmbedderConfig, cache_dir: Path, runtimes: Sequence[str] | None
) -> list[tuple[str, Embedder]]:
    """(label, embedder) for each run of `klaw bench embed`: every local runtime asked for (default
    all) when the backend is minilm, else the configured embedder alone. The ONNX ones use the home's
    cache, so their first run includes building it (`warmup_ms`) and later runs do not."""
    if config.backend != "minilm":
        if runtimes:
            raise ValueError(f"--runtime compares minilm runtimes; embedder.backend is {config.backend}")
        return [(config.backend, create_embedder(config, cache_dir=cache_dir))]
    chosen = list(runtimes or LOCAL_RUNTIMES)
    unknown = [name for name in chosen if name not in LOCAL_RUNTIMES]
    if unknown:
        raise ValueError(f"unknown --runtime {', '.join(unknown)}: choose from {', '.join(LOCAL_RUNTIMES)}")
    return [
        (runtime, create_embedder(config.model_copy(update={"runtime": runtime}), cache_dir=cache_dir))
        for runtime in LOCAL_RUNTIMES
        if runtime in chosen
    ]


def summary_line(label: str, result: EmbedderBenchResult) -> str:
    """One runtime's figures on one line: what the comparison table of `klaw bench embed` shows."""
    single, batched = result.for_batch_size(1), result.batches[-1]
    return (
        f"{label:<10} {result.model_id}: one text p50 {single.ms_per_call_p50:.1f} ms"
        f" (p95 {single.ms_per_call_p95:.1f}); batch {batched.batch_size}: {batched.sentences_per_second:.0f} texts/s;"
        f" first call (load) {result.warmup_ms:.0f} ms"
    )


# --- benchmark text ---------------------------------------------------------------------------------

_NAMES = ("Sarah", "Tom", "Aiko", "Miguel", "Priya", "Jonas", "Lena", "Omar", "Grandma", "my boss")
_PLACES = (
    "the Italian place on Main Street",
    "the office",
    "the gym",
    "the farmers market",
    "Lisbon",
    "the dentist",
    "my parents' house",
    "the train station",
    "the library",
    "the new bakery",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TIMES = ("at 8", "in the morning", "after lunch", "around 5 pm", "tonight", "next week", "before noon")
_TOPICS = (
    "the kitchen renovation",
    "her new job",
    "the budget for the trip",
    "his marathon training",
    "the broken heating",
    "the quarterly report",
    "moving to Berlin",
    "the kids' school play",
    "adopting a dog",
    "the car insurance renewal",
    "learning Japanese",
    "the wedding playlist",
)
_TASKS = (
    "call the plumber",
    "renew my passport",
    "pay the electricity bill",
    "book a table for four",
    "send the slides to the team",
    "water the tomatoes",
    "buy a birthday present for Lena",
    "back up the laptop",
    "cancel the streaming subscription",
    "pick up the dry cleaning",
)
_PREFS = (
    "prefers oat milk in coffee",
    "is allergic to peanuts",
    "hates early meetings",
    "likes window seats on long flights",
    "reads science fiction before bed",
    "runs every other day",
    "only drinks decaf after 3 pm",
    "wants vegetarian recipes for weeknights",
)
_FEELINGS = ("relieved", "stressed", "excited", "a bit worried", "tired but happy", "annoyed")


def _fill(rng: random.Random) -> str:
    """One sentence in one of the shapes an assistant's memory actually holds."""
    name, place, day, when = rng.choice(_NAMES), rng.choice(_PLACES), rng.choice(_DAYS), rng.choice(_TIMES)
    topic, task, pref, feeling = rng.choice(_TOPICS), rng.choice(_TASKS), rng.choice(_PREFS), rng.choice(_FEELINGS)
    shapes = (
        f"Remind me to {task} {when}.",
        f"{name} {pref}.",
        f"What did {name} say about {topic}?",
        f"I had lunch with {name} at {place} on {day} and we talked about {topic}.",
        f"Note: {name} {pref}, so keep that in mind when planning {topic}.",
        f"On {day} I felt {feeling} because of {topic}; {name} suggested I {task} first.",
        f"Can you find the message where {name} mentioned {topic} and {place}?",
        f"Meeting with {name} moved to {day} {when} at {place}.",
        f"Don't forget: {task}, then {rng.choice(_TASKS)}, and tell {name} about {topic}.",
        f"Honestly I'm {feeling} about {topic}, but {name} thinks it will work out if we {task} soon.",
    )
    return rng.choice(shapes)


def benchmark_sentences(count: int = 512, *, seed: int = 0) -> list[str]:
    """`count` varied, realistic assistant-memory sentences, identical for a given seed everywhere.

    Roughly one in six items joins two or three sentences, like a short chat message, so lengths
    spread from a few words to a few dozen (realistic padding inside a batch). `random.Random`
    with an int seed is stable across Python versions and platforms.
    """
    if count < 0:
        raise ValueError("count must be >= 0")
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = 1 if rng.random() < 5 / 6 else rng.randint(2, 3)
        out.append(" ".join(_fill(rng) for _ in range(parts)))
    return out
