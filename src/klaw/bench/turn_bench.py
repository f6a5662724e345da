"""`klaw bench turn`: the engine's own cost per turn, with the model taken out of the picture.

A real engine (SQLite file, fsync'd log, context builder, tool registry, processor) answers through
the fake OpenAI server with zero model delay, so what remains is klaw's overhead plus one loopback
HTTP round trip, which is measured separately and reported beside it. The fake server runs in a
process of its own (bench/model_process.py), as a real model server does, so its work is not counted
as the engine's. The bench chat is first filled with `stored` messages as turns leave them (exchanges
and summaries, Zipfian text: `turn_fill.py`, decision 434; the window and counts then run against a
large table), the timed turns ask varied questions of the same vocabulary, and a second phase measures
throughput with many chats talking at once, with the CPU time a turn cost the engine's process there
(all its threads), of which its event loop's thread, and the model's process beside it.

Each timed turn is broken into its phases from the timings the engine records on every turn
(engine/turn_timing.py, kept with the turn's context record), so a regression shows where it is:
accept (log fsync + row, before the turn), exchange (its open record), context and each of its
layers, slot (waiting for an LLM slot, held by the model's calls alone: decision 253), model (the
loopback call to the fake server, and tools if any), reply (the answer's and the
exchange's records, delivery). Background work the turns trigger is counted: model calls made
for summaries while the timed turns ran, per turn. The fake server answers summary requests as a
model following their prompts does (`summary_model.wire_reply`: one numbered line per exchange of a
batch), so the summarizer's work is what it would be against a real model.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.table import Table

from klaw.bench.bars import latency_table
from klaw.bench.corpus import MESSAGE_SPACING_S
from klaw.bench.model_process import ModelProcess
from klaw.bench.stats import Latency
from klaw.bench.turn_fill import BENCH_VERSION, TurnFill, questions
from klaw.config import DatabaseConfig, EngineConfig
from klaw.engine.context_history import TurnContext
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.event_loop import loop_name
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.messages import ChatMessage
from klaw.memory.embedder.factory import create_embedder
from klaw.memory.embedder.protocol import Embedder, Vectors, WrappedEmbedder
from klaw.store.protocol import Storage
from klaw.store.records import MESSAGE_TARGET, ChatRef, MessageRecord
from klaw.store.sqlite.store import SqliteStore

BENCH_CHANNEL = "bench"
FILL_BATCH = 2000  # conversation messages a fill batch (one append: ~5,000 records with their control records)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class TurnBenchResult:
    stored_messages: int
    turn: Latency  # submit → reply delivered, zero-delay model
    context_build: Latency
    fake_llm_round_trip: Latency  # one loopback HTTP call to the fake server, for subtraction
    concurrent_chats: int
    concurrent_turns: int
    turns_per_second: float
    phases: dict[str, Latency]  # per phase of a timed turn (engine/turn_timing.py names)
    background_model_calls_per_turn: float  # summarizer requests during the timed turns
    cpu_ms_per_turn: float  # the engine's process, all threads, over the many-chats phase
    model_cpu_ms_per_turn: float  # the fake model's own process, same phase
    embedder: str = "fake"  # `embedder.backend` of the run
    embedded_texts_per_turn: float = 0.0  # texts the embedder computed during the timed turns (queue and queries)
    loop_cpu_ms_per_turn: float = 0.0  # of cpu_ms_per_turn, the event loop's thread alone (decision 220)
    event_loop: str = "asyncio"  # the loop the bench ran on: uvloop as `klaw engine` runs, or asyncio's
    gc_ms_per_turn: float = 0.0  # of cpu_ms_per_turn, Python's cyclic collector (any thread), decision 303
    gc_frozen_objects: int = 0  # objects the collector no longer scans (`keep_start_up_heap`, as `klaw engine`)
    backend: str = "sqlite"  # `database.backend` of the run (PostgreSQL: a schema of its own, bench_store.py)
    # 2 since decision 434 (the fill writes exchanges and summaries, Zipfian text, varied questions): figures
    # of version 1 (no key) measured another chat and are not to be compared with these. 3 since decision 493
    # (the fill stores every message's vector: the vector side scans the whole chat, as a real one's does).
    bench_version: int = BENCH_VERSION
    stored_vectors: int = 0  # message vectors in the store after the fill (one a stored message since version 3)
    vector_hits_per_turn: float = 0.0  # auto-RAG hits a timed turn placed that the vector side found


async def measure_turns(
    root: Path,
    *,
    stored: int,
    turns: int = 200,
    concurrent_chats: int = 50,
    turns_per_chat: int = 4,
    progress: Progress | None = None,
    embedder: str = "fake",
    after_start: Callable[[], None] = lambda: None,
    database: DatabaseConfig | None = None,
) -> TurnBenchResult:
    """`embedder`: `fake` (hashed words, ~0.3 ms a text: the engine's own overhead) or `minilm` (the
    default local model, whose query embedding is part of a real turn). `after_start`: what the command
    running an engine does once it started (`klaw bench turn` passes `keep_start_up_heap`, as `klaw engine`).
    `database`: the engine's `database` section (default: SQLite in the home; PostgreSQL's comes from
    `bench_store.engine_database`, a schema of the bench's own)."""
    home = KlawHome(root)
    initialise_home(home)
    async with ModelProcess() as server:
        config = EngineConfig.model_validate(
            {
                "models": {"fake/bench": {"baseUrl": server.base_url, "contextBudget": 8192, "maxRetries": 0}},
                "routing": {"default": "fake/bench"},
                "processing": {"debounceMs": 0},
                "embedder": {"backend": embedder},
            }
        )
        if database is not None:
            config = config.model_copy(update={"database": database})
        counted = CountingEmbedder(create_embedder(config.embedder, cache_dir=home.embedder_cache))
        await counted.embed(["the model loaded before the timed turns"])
        engine = await Engine.start(home, config, listen=False, embedder=counted)
        after_start()
        replies = _ReplyWaiter()
        engine.delivery.register(BENCH_CHANNEL, replies.deliver)
        try:
            chat = ChatRef(BENCH_CHANNEL, "main")
            await _fill(engine, chat, stored, progress)
            stored_vectors = await engine.store.vectors.count()
            turn_times = []
            records: list[TurnContext] = []
            if engine.docs is not None:
                # Built now, not 10 s after start-up in the middle of the timed turns: its embedding
                # work landed in some runs and not others (embedded texts a turn 2.98 -> 4.08, p95 x2).
                await engine.docs.ensure()
            requests_before = await server.chat_requests()
            await engine.embedding_queue.wait_idle()
            texts_before = counted.texts
            for i, question in enumerate(questions(turns)):
                start = time.perf_counter()
                await replies.turn(engine, chat, question)
                turn_times.append(time.perf_counter() - start)
                records.append(engine.processor.context_history.turns(chat)[0])
                if progress:
                    progress("turns", i + 1, turns)
            background_calls = await server.chat_requests() - requests_before - turns
            await engine.embedding_queue.wait_idle()
            embedded = counted.texts - texts_before
            build_times = await _context_builds(engine, chat, turns)
            round_trips = await _round_trips(engine, turns)
            model_cpu = await server.cpu_seconds()
            cpu, loop_cpu, start = time.process_time(), time.thread_time(), time.perf_counter()
            with CollectorTime() as collector:
                await asyncio.gather(
                    *(
                        _chat_turns(engine, replies, ChatRef(BENCH_CHANNEL, f"c{n}"), turns_per_chat)
                        for n in range(concurrent_chats)
                    )
                )
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            loop_cpu = time.thread_time() - loop_cpu
            model_cpu = await server.cpu_seconds() - model_cpu
        finally:
            await engine.shutdown(timeout_seconds=10)
    total = concurrent_chats * turns_per_chat
    return TurnBenchResult(
        stored_messages=stored,
        turn=Latency.of(turn_times),
        context_build=Latency.of(build_times),
        fake_llm_round_trip=Latency.of(round_trips),
        concurrent_chats=concurrent_chats,
        concurrent_turns=total,
        turns_per_second=total / elapsed,
        phases=phase_latencies(records),
        background_model_calls_per_turn=background_calls / turns if turns else 0.0,
        cpu_ms_per_turn=cpu * 1000 / total,
        model_cpu_ms_per_turn=model_cpu * 1000 / total,
        embedder=embedder,
        embedded_texts_per_turn=embedded / turns if turns else 0.0,
        loop_cpu_ms_per_turn=loop_cpu * 1000 / total,
        event_loop=loop_name(),
        gc_ms_per_turn=collector.seconds * 1000 / total,
        gc_frozen_objects=gc.get_freeze_count(),
        backend=config.database.backend,
        stored_vectors=stored_vectors,
        vector_hits_per_turn=sum(hit.distance is not None for r in records for hit in r.recalled) / max(1, turns),
    )


def phase_latencies(records: list[TurnContext]) -> dict[str, Latency]:
    """p50/p95 per phase over the turns, phases in the order a turn runs them (a phase a turn
    skipped, e.g. auto-RAG below the window, counts as 0 for that turn)."""
    seen: dict[str, None] = {}
    for record in records:
        seen.update(dict.fromkeys(record.timings.seconds))
    # A phase's parts are timed before it ends: list each top phase first, then its parts.
    tops = list(dict.fromkeys(name.split(".", 1)[0] for name in seen))
    names = [name for top in tops for name in [top, *(n for n in seen if n.startswith(top + "."))] if name in seen]
    return {name: Latency.of([r.timings.seconds.get(name, 0.0) for r in records]) for name in names}


class CollectorTime:
    """`with CollectorTime() as c:` the CPU Python's cyclic collector took inside the block, whichever thread
    ran it (a collection holds the GIL from its start to its end, so both ends are on one thread)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started


class CountingEmbedder(WrappedEmbedder):
    """The engine's embedder, counting the texts it computes (the queue's and the turns' queries)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts += len(texts)
        return await self._inner.embed(texts)


class _ReplyWaiter:
    def __init__(self) -> None:
        self._waiting: dict[str | None, asyncio.Future[Outbound]] = {}

    async def deliver(self, outbound: Outbound) -> None:
        future = self._waiting.pop(outbound.reply_to, None)
        if future is not None and not future.done():
            future.set_result(outbound)

    async def turn(self, engine: Engine, chat: ChatRef, text: str) -> Outbound:
        submitted = await engine.submit(chat, text)
        future = self._waiting.setdefault(submitted.message_id, asyncio.get_running_loop().create_future())
        async with asyncio.timeout(60):  # not wait_for, which can drop a cancel (decision 428)
            return await future


async def _chat_turns(engine: Engine, replies: _ReplyWaiter, chat: ChatRef, count: int) -> None:
    for i in range(count):
        await replies.turn(engine, chat, f"message {i} from {chat.chat_id}")


async def _fill(engine: Engine, chat: ChatRef, stored: int, progress: Progress | None) -> None:
    """The chat's `stored` messages as turns the engine would have left (`turn_fill.py`: exchanges, their
    summaries, a rolling segment summary, replies delivered), ending a day before the timed turns, each
    message with the vector the embedding queue would have stored for it: the engine's embedder's, of
    the message's text (decision 493: without them the vector side's scan never ran, ~7 ms of CPU a turn
    at 100k; `bench scale`'s random unit vectors cost the same scan but are close to no question, and
    auto-RAG then placed no hit at all). Stored a batch at a time by one `put_vectors` call, as the queue
    stores them."""
    start = datetime.now(UTC) - timedelta(days=1, seconds=MESSAGE_SPACING_S * stored)
    fill = TurnFill(chat, start, await engine.store.exchanges.high_water() + 1)
    while fill.written < stored:
        records, replies = fill.batch(min(FILL_BATCH, stored - fill.written))
        rowids = await _append(engine.store, records)
        await engine.store.exchanges.mark_delivered(replies)
        said = [(rowid, r.content) for r, rowid in zip(records, rowids, strict=True) if r.is_conversation]
        if engine.embedder is not None and said:
            vectors = await engine.embedder.embed([text for _, text in said])
            puts = [(rowid, vector) for (rowid, _), vector in zip(said, vectors, strict=True)]
            await engine.store.embedding_jobs.put_vectors({MESSAGE_TARGET: puts})
        if progress:
            progress("fill", fill.written, stored)
    if not isinstance(engine.store, SqliteStore):
        from klaw.bench.pg_fill import analyze
        from klaw.store.postgres.store import PostgresStore

        assert isinstance(engine.store, PostgresStore)
        await analyze(engine.store)


async def _append(store: Storage, records: list[MessageRecord]) -> list[int]:
    """The store's own append (its folds write the exchanges and summaries); on PostgreSQL the same rows
    in bulk (its append is ~100 messages a second here, `pg_fill.py` says why; 100,000 would take 20 minutes).
    Returns the records' rowids, in their order."""
    if isinstance(store, SqliteStore):
        return [stored.rowid for stored in await store.messages.append_many(records)]
    from klaw.bench.pg_fill import append_conversation
    from klaw.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    return await append_conversation(store, records)


async def _context_builds(engine: Engine, chat: ChatRef, count: int) -> list[float]:
    session = await engine.sessions.get_or_create(chat)
    window = await engine.store.messages.window(session.segment.id, 1)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        await engine.processor.context_builder.build(session, window)
        times.append(time.perf_counter() - start)
    return times


async def _round_trips(engine: Engine, count: int) -> list[float]:
    model = engine.router.default
    times = []
    for i in range(count):
        start = time.perf_counter()
        await model.complete([ChatMessage.user(f"ping {i}")])
        times.append(time.perf_counter() - start)
    return times


def phase_table(size: int, phases: dict[str, Latency], width: int = 32, title: str = "") -> Table:
    """A turn's phases as rows (dotted names are parts of the phase above them), each with its bar."""
    table = latency_table(f"{title}turn phases at {size} stored messages (ms)", phases, width)
    table.columns[0].header = "phase"
    return table


def phase_comparison(size: int, by_backend: dict[str, dict[str, Latency]]) -> Table:
    """Each phase's p50 and p95 on each backend side by side, with the last backend's p50 over the first's
    (the phases of every backend, in the order a turn runs them; a phase one backend lacks shows `-`)."""
    backends = list(by_backend)
    names = list(dict.fromkeys(name for phases in by_backend.values() for name in phases))
    table = Table(title=f"turn phases at {size} stored messages (ms): {' vs '.join(backends)}")
    table.add_column("phase")
    for backend in backends:
        table.add_column(f"{backend} p50", justify="right")
        table.add_column(f"{backend} p95", justify="right")
    table.add_column(f"{backends[-1]}/{backends[0]} p50", justify="right")
    for name in names:
        cells = [("  " * name.count(".")) + name.rsplit(".", 1)[-1]]
        for backend in backends:
            latency = by_backend[backend].get(name)
            cells += [f"{latency.p50_ms:.2f}", f"{latency.p95_ms:.2f}"] if latency else ["-", "-"]
        first, last = by_backend[backends[0]].get(name), by_backend[backends[-1]].get(name)
        ratio = last.p50_ms / first.p50_ms if first and last and first.p50_ms > 0 else None
        cells.append(f"{ratio:.1f}x" if ratio is not None and math.isfinite(ratio) else "-")
        table.add_row(*cells)
    return table
