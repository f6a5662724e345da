"""Running the LoCoMo bench: each conversation into a fresh store through the real ingestion path,
then every scorable question through each retrieval variant.

Indexing follows `bench/METRICS.md`: one chat per conversation, every turn one user message
`"<speaker>: <text>"` (+ `" [shares <caption>]"`), dated by its session (turns one second apart),
all sessions in one segment. Messages go through `Ingestion.accept` (JSONL log, then `messages`
and FTS, with an embedding job for the messages the product embeds), then the durable
`EmbeddingQueue` is drained. Which turns get a vector is the product's rule (`should_embed` with
`autoRag.minMessageTokens`), not the bench's: short turns stay findable by full text only, exactly
as they would in use, and the counts are reported.

Timings: ingestion throughput is all turns over the wall time of storing plus embedding them;
latency is the wall time of one retrieval call (query embedding included), per variant.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from klaw.bench.bench_store import bench_store
from klaw.bench.locomo.dataset import Conversation, LocomoDataset
from klaw.bench.locomo.metrics import TOP_K, QuestionScores, Summary, score_question, summarise
from klaw.bench.locomo.variants import VARIANTS, retriever
from klaw.bench.locomo.workbench import Workbench
from klaw.bench.stats import Latency
from klaw.config import DatabaseConfig, SearchConfig
from klaw.engine.clock import SystemClock
from klaw.errors import KlawError
from klaw.memory.conversation_log import open_log
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedding_policy import should_embed
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.ingestion import Ingestion
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, Role

CHANNEL = "locomo"


class LocomoRunError(KlawError, RuntimeError):
    """The run cannot produce honest figures (e.g. embeddings failed)."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    variants: tuple[str, ...] = VARIANTS
    min_embed_tokens: int = 10  # autoRag.minMessageTokens of the configuration in use
    batch_size: int = 64  # embedder.batchSize: texts per embedding call of the queue
    top_k: int = TOP_K
    search: SearchConfig = field(default_factory=SearchConfig)  # the `search` section of the configuration in use
    # The `database` section in use: SQLite files in the scratch directory, or PostgreSQL (a schema per conversation).
    database: DatabaseConfig = field(default_factory=DatabaseConfig)

    def __post_init__(self) -> None:
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or not self.variants:
            raise ValueError(f"variants must be a non-empty subset of {', '.join(VARIANTS)}; got {self.variants}")


@dataclass(slots=True)
class IngestStats:
    turns: int = 0
    embedded: int = 0  # turns that got a vector
    store_seconds: float = 0.0  # log + messages + FTS + job rows
    embed_seconds: float = 0.0  # draining the embedding queue

    @property
    def not_embedded(self) -> int:
        """Turns the product's embedding rule leaves to full text alone (too short)."""
        return self.turns - self.embedded

    @property
    def turns_per_s(self) -> float:
        seconds = self.store_seconds + self.embed_seconds
        return self.turns / seconds if seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class QuestionResult:
    """One question's figures per variant, and where each evidence turn ranked (None: not in top_k)."""

    sample_id: str
    index: int
    category: int
    evidence: tuple[str, ...]
    scores: dict[str, QuestionScores]
    evidence_ranks: dict[str, tuple[int | None, ...]]


@dataclass(frozen=True, slots=True)
class VariantResult:
    summary: Summary
    latency: Latency


@dataclass(frozen=True, slots=True)
class LocomoRun:
    dataset: LocomoDataset
    settings: RunSettings
    embedder_id: str
    embedder_dim: int
    ingest: IngestStats
    variants: dict[str, VariantResult]
    questions: list[QuestionResult] = field(default_factory=list)
    seconds: float = 0.0


def conversation_records(conversation: Conversation) -> list[tuple[MessageRecord, str]]:
    """The messages a conversation becomes, in order, each with its turn id."""
    chat = ChatRef(CHANNEL, conversation.sample_id)
    return [
        (
            MessageRecord(
                chat=chat,
                role=Role.USER,
                content=turn.message_text,
                created_at=session.started_at + timedelta(seconds=offset),
            ),
            turn.dia_id,
        )
        for session in conversation.sessions
        for offset, turn in enumerate(session.turns)
    ]


async def run_locomo(dataset: LocomoDataset, bench: Workbench, settings: RunSettings | None = None) -> LocomoRun:
    """Measure every variant on every conversation of `dataset`; stages: "storing turns", "embedding
    turns" and "questions"."""
    settings = settings or RunSettings()
    embedder = bench.embedder
    started = time.perf_counter()
    records = {c.sample_id: conversation_records(c) for c in dataset.conversations}
    totals = {
        "storing turns": dataset.turn_count,
        "embedding turns": sum(
            1 for pairs in records.values() for record, _ in pairs if should_embed(record, settings.min_embed_tokens)
        ),
        "questions": dataset.question_count * len(settings.variants),
    }
    advance = bench.stages(totals)
    ingest = IngestStats()
    latencies: dict[str, list[float]] = {v: [] for v in settings.variants}
    results: list[QuestionResult] = []
    for position, conversation in enumerate(dataset.conversations):
        directory = bench.work_dir / f"{position:03d}"
        directory.mkdir(parents=True, exist_ok=False)
        async with bench_store(directory / "klaw.db", settings.database) as store:
            segment_id, dia_of = await _ingest(
                store, embedder, directory, records[conversation.sample_id], settings, ingest, advance
            )
            results += await _ask(store, embedder, conversation, segment_id, dia_of, settings, latencies, advance)

    variants = {
        v: VariantResult(summarise([(r.category, r.scores[v]) for r in results]), Latency.of(latencies[v]))
        for v in settings.variants
    }
    return LocomoRun(
        dataset=dataset,
        settings=settings,
        embedder_id=embedder.model_id,
        embedder_dim=embedder.dim,
        ingest=ingest,
        variants=variants,
        questions=results,
        seconds=time.perf_counter() - started,
    )


async def _ingest(
    store: Storage,
    embedder: Embedder,
    directory: Path,
    records: Sequence[tuple[MessageRecord, str]],
    settings: RunSettings,
    ingest: IngestStats,
    advance: Callable[[str, int], None],
) -> tuple[int, dict[str, str]]:
    """Store and embed one conversation; returns its segment and message id → turn id."""
    await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
    queue = EmbeddingQueue(store, embedder, SystemClock(), batch_size=settings.batch_size)
    log = open_log(directory / "conversations", kept_by_store=store.keeps_log)
    ingestion = Ingestion(log, store, min_embed_tokens=settings.min_embed_tokens)
    dia_of: dict[str, str] = {}
    segments: set[int] = set()
    began = time.perf_counter()
    for record, dia_id in records:
        stored = await ingestion.accept(record)
        dia_of[stored.record.id] = dia_id
        segments.add(stored.segment_id)
        advance("storing turns", 1)
    stored_at = time.perf_counter()
    reported = 0

    def embedding_progress(embedded: int, _total: int) -> None:
        nonlocal reported
        advance("embedding turns", embedded - reported)
        reported = embedded

    embedded = await queue.run_until_idle(embedding_progress)
    ingest.store_seconds += stored_at - began
    ingest.embed_seconds += time.perf_counter() - stored_at
    ingest.turns += len(records)
    ingest.embedded += embedded
    counts = await store.embedding_jobs.counts()
    if counts.pending or counts.failed:
        raise LocomoRunError(
            f"{counts.pending + counts.failed} embedding(s) did not complete (see the log for the error);"
            " vector figures would be wrong"
        )
    if len(segments) != 1:
        raise LocomoRunError(f"a conversation landed in {len(segments)} segments; expected one")
    return segments.pop(), dia_of


async def ingest_conversation(
    store: Storage,
    embedder: Embedder,
    directory: Path,
    records: Sequence[tuple[MessageRecord, str]],
    min_embed_tokens: int,
    batch_size: int,
) -> tuple[int, dict[str, str]]:
    """One conversation stored and embedded as the bench does (one segment); returns its segment and
    message id → turn id."""
    settings = RunSettings(min_embed_tokens=min_embed_tokens, batch_size=batch_size)
    return await _ingest(store, embedder, directory, records, settings, IngestStats(), lambda stage, count: None)


async def _ask(
    store: Storage,
    embedder: Embedder,
    conversation: Conversation,
    segment_id: int,
    dia_of: dict[str, str],
    settings: RunSettings,
    latencies: dict[str, list[float]],
    advance: Callable[[str, int], None],
) -> list[QuestionResult]:
    chat = ChatRef(CHANNEL, conversation.sample_id)
    session_of = conversation.session_of()
    retrievers = {v: retriever(v, store, embedder, settings.search) for v in settings.variants}
    results = []
    for question in conversation.questions:
        scores: dict[str, QuestionScores] = {}
        ranks: dict[str, tuple[int | None, ...]] = {}
        for variant, retrieve in retrievers.items():
            began = time.perf_counter()
            messages = await retrieve(chat, question.text, segment_id, settings.top_k)
            latencies[variant].append(time.perf_counter() - began)
            ranking = [dia_of[m.record.id] for m in messages if m.record.id in dia_of][: settings.top_k]
            scores[variant] = score_question(ranking, question.evidence, session_of)
            position = {dia_id: rank for rank, dia_id in enumerate(ranking, start=1)}
            ranks[variant] = tuple(position.get(dia_id) for dia_id in question.evidence)
            advance("questions", 1)
        results.append(
            QuestionResult(conversation.sample_id, question.index, question.category, question.evidence, scores, ranks)
        )
    return results
