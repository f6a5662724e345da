"""`klaw bench …`: measured figures for speed targets (never timed unit tests)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

app = typer.Typer(help="Benchmarks: embedder throughput, vector search latency, …", no_args_is_help=True)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    )


def _stage_reporter(progress: Progress, prefix: str = "") -> Callable[[str, int, int], None]:
    """A progress callback that shows one bar per stage name."""
    tasks: dict[str, TaskID] = {}

    def report(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(f"{prefix}{stage}", total=total)
        progress.update(tasks[stage], completed=done)

    return report


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def _emit(result: dict[str, Any], out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")


@app.command()
def vectors(
    rows: Annotated[int, typer.Option(help="Messages (and vectors) in the database.")] = 100_000,
    chats: Annotated[int, typer.Option(help="Chats the rows are spread over; queries search one.")] = 1,
    dim: Annotated[int, typer.Option(help="Vector size (384 = MiniLM).")] = 384,
    k: Annotated[int, typer.Option(help="Neighbours per query.")] = 20,
    queries: Annotated[int, typer.Option(help="Queries to time.")] = 200,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Per-chat vector (sqlite-vec) and full-text latency at scale, beside a numpy brute-force floor."""
    from klaw.bench.vector_bench import measure_vector_search

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, _progress() as progress:
        report = _stage_reporter(progress)
        result = asyncio.run(
            measure_vector_search(
                Path(tmp) / "bench.db", rows=rows, chats=chats, dim=dim, k=k, queries=queries, progress=report
            )
        )
    console = Console(markup=False)
    console.print(f"machine: {machine()}")
    console.print(
        f"{result.rows} rows in {result.chats} chat(s), dim {result.dim}, k={result.k};"
        f" insert {result.insert_rows_per_s:.0f} rows/s"
    )
    console.print(f"store KNN (messages fetched):     {result.knn}   recall@k vs exact: {result.recall_at_k:.3f}")
    console.print(f"numpy brute-force floor:          {result.numpy_floor}")
    console.print(f"FTS5 bm25:                        {result.full_text}")
    _emit({"machine": machine(), **asdict(result)}, out)


@app.command()
def scale(
    size: Annotated[
        list[int] | None, typer.Option(help="Messages in the bench chat (repeatable; default 10k and 100k).")
    ] = None,
    queries: Annotated[int, typer.Option(help="Queries timed per size.")] = 200,
    vector_cache_mb: Annotated[int, typer.Option(help="database.vectorCacheMb for the run.")] = 256,
    reindex_size: Annotated[int, typer.Option(help="Messages in the home reindexed for throughput (0 = skip).")] = 5000,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Auto-RAG search latency at 10k/100k messages (with and without the query embedding) beside a
    numpy floor, and `klaw reindex` throughput, with the configured embedder."""
    from klaw.bench.scale_bench import measure_scale
    from klaw.cli.context import home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder

    config = load_or_exit(home_from_env()).config
    console = Console(markup=False)
    console.print(f"machine: {machine()}")
    results: dict[str, Any] = {"machine": machine(), "embedder": config.embedder.backend, "search": []}
    for messages in size or [10_000, 100_000]:
        embedder = create_embedder(config.embedder)
        with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, _progress() as progress:
            report = _stage_reporter(progress, f"{messages} messages: ")
            try:
                result = asyncio.run(
                    measure_scale(
                        Path(tmp) / "bench.db",
                        embedder,
                        messages=messages,
                        queries=queries,
                        vector_cache_bytes=vector_cache_mb * 1024 * 1024,
                        vector_search_threads=config.database.vector_search_threads,
                        progress=report,
                    )
                )
            finally:
                asyncio.run(embedder.aclose())
        results["search"].append(asdict(result))
        console.print(
            f"{messages} messages (dim {result.dim}, built at {result.build_rows_per_s:.0f} rows/s):\n"
            f"  auto-RAG search without query embedding: {result.search_without_embedding}\n"
            f"  auto-RAG search with query embedding:    {result.search_with_embedding}\n"
            f"  query embedding alone:                   {result.query_embedding}\n"
            f"  numpy brute-force floor (KNN only):      {result.numpy_floor} on 1 thread;"
            f" {result.numpy_floor_threaded} on {result.search_threads} (as the search)\n"
            f"  first search (loads the chat's vectors): {result.first_search_ms:.0f} ms;"
            f" {result.recalled_per_query:.1f} messages recalled per query\n"
            f"  past conversations without query embedding ({result.past_segments} past segments,"
            f" {result.summaries} summaries, {result.past_shown_per_query:.1f} shown): {result.past_conversations}\n"
            f"  all retrieval layers (auto-RAG + past conversations) without query embedding: {result.all_layers}"
        )
    if reindex_size > 0:
        results["reindex"] = _reindex_throughput(console, config, reindex_size)
    _emit(results, out)


@app.command()
def embed(
    texts: Annotated[int, typer.Option(help="Sentences to embed per batch size.")] = 512,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Throughput of the configured embedder: one sentence at a time and batched."""
    from klaw.bench.embedder_bench import benchmark_sentences, measure_embedder
    from klaw.cli.context import home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder

    config = load_or_exit(home_from_env()).config
    embedder = create_embedder(config.embedder)

    async def run() -> Any:
        try:
            with _progress() as progress:
                task = progress.add_task(f"embedding with {embedder.model_id}", total=None)
                return await measure_embedder(
                    embedder,
                    texts=benchmark_sentences(texts),
                    progress=lambda done: progress.update(task, completed=done),
                )
        finally:
            await embedder.aclose()

    result = asyncio.run(run())
    Console(markup=False).print(f"machine: {machine()}\n{result}")
    _emit({"machine": machine(), "embedder": embedder.model_id, **asdict(result)}, out)


@app.command()
def turn(
    stored: Annotated[
        list[int] | None, typer.Option(help="Stored messages in the chat before timing (repeatable).")
    ] = None,
    turns: Annotated[int, typer.Option(help="Sequential turns timed per size.")] = 200,
    chats: Annotated[int, typer.Option(help="Concurrent chats in the throughput phase.")] = 50,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Engine overhead per turn (context build + bookkeeping; model = zero-delay local fake server)."""
    from klaw.bench.turn_bench import measure_turns, phase_table

    console = Console(markup=False)
    console.print(f"machine: {machine()}")
    results = []
    for size in stored or [1_000, 100_000]:
        with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, _progress() as progress:
            report = _stage_reporter(progress, f"{size} stored: ")
            result = asyncio.run(
                measure_turns(Path(tmp) / "home", stored=size, turns=turns, concurrent_chats=chats, progress=report)
            )
        results.append(asdict(result))
        console.print(
            f"{size} stored messages: turn {result.turn}; context build {result.context_build};"
            f" fake LLM round trip {result.fake_llm_round_trip};"
            f" {result.concurrent_chats} concurrent chats: {result.turns_per_second:.1f} turns/s;"
            f" background model calls per turn {result.background_model_calls_per_turn:.2f}"
        )
        console.print(phase_table(size, result.phases))
    _emit({"machine": machine(), "results": results}, out)


@app.command()
def load(
    chats: Annotated[int, typer.Option(help="Chats sending at once, each on its own socket connection.")] = 50,
    seconds: Annotated[float, typer.Option(help="How long the chats keep sending.")] = 20.0,
    debounce_ms: Annotated[int, typer.Option("--debounce-ms", help="processing.debounceMs of the engine.")] = 0,
    kill_after: Annotated[
        float | None, typer.Option(help="SIGKILL the engine this many seconds in, then start it again.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Many chats through a real `klaw engine`'s socket (model: zero-delay fake server): turns/s, send → reply
    p50/p95, and whether acknowledged = stored = answered (optionally across a SIGKILL and restart)."""
    from klaw.bench.load_bench import measure_load

    console = Console(soft_wrap=True, markup=False)
    console.print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="klaw-bench-", dir="/tmp") as tmp:  # short: a socket path
        result = asyncio.run(
            measure_load(
                Path(tmp) / "home", chats=chats, seconds=seconds, debounce_ms=debounce_ms, kill_after=kill_after
            )
        )
    killed = " (engine SIGKILLed and restarted mid-run)" if result.killed else ""
    console.print(
        f"{result.chats} chats, {seconds:g} s, debounceMs {result.debounce_ms}{killed}: {result.turns_per_second:.1f}"
        f" turns/s, send → reply {result.latency}"
    )
    verdict = "yes" if result.consistent else f"NO (unanswered, first ids: {', '.join(result.unanswered_ids)})"
    console.print(
        f"acknowledged {result.acknowledged}, stored {result.stored}, answered {result.answered}:"
        f" acknowledged = stored = answered: {verdict}"
    )
    _emit({"machine": machine(), **asdict(result), "consistent": result.consistent}, out)
    if not result.consistent:
        raise typer.Exit(1)


@app.command()
def warm(
    chats: Annotated[int, typer.Option(help="Chats in the database.")] = 3050,
    per_chat: Annotated[int, typer.Option(help="Vectors per chat.")] = 10,
    dim: Annotated[int, typer.Option(help="Vector size (384 = MiniLM).")] = 384,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """How long filling the vector cache takes at start-up, with many chats."""
    from klaw.bench.warm_bench import measure_warm

    console = Console(soft_wrap=True)
    console.print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        result = asyncio.run(measure_warm(Path(tmp), chats=chats, per_chat=per_chat, dim=dim))
    console.print(
        f"{result.chats} chats x {result.per_chat} vectors ({result.dim} dims): warm_cache {result.warm_seconds:.2f} s,"
        f" {result.chats_loaded} chats loaded"
    )
    _emit({"machine": machine(), **asdict(result)}, out)


@app.command()
def locomo(
    data: Annotated[Path, typer.Option(help="A LoCoMo-format JSON file (locomo10.json or a split of it).")],
    out: Annotated[Path, typer.Option(help="Directory for locomo.json and locomo.md.")] = Path("bench-results"),
    variants: Annotated[str, typer.Option(help="Comma-separated retrieval variants.")] = "hybrid,vector,fts",
) -> None:
    """Retrieval quality on LoCoMo: evidence recall of hybrid, vector-only and full-text-only search
    through the real ingestion and search path, with the configured embedder."""
    from datetime import UTC, datetime

    from rich.markdown import Markdown

    from klaw.bench.locomo.dataset import LocomoFormatError, load_locomo
    from klaw.bench.locomo.report import to_json, to_markdown
    from klaw.bench.locomo.runner import LocomoRunError, RunSettings, run_locomo
    from klaw.cli.context import fail, home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder

    config = load_or_exit(home_from_env()).config
    try:
        settings = RunSettings(
            variants=tuple(v.strip() for v in variants.split(",") if v.strip()),
            min_embed_tokens=config.auto_rag.min_message_tokens,
            batch_size=config.embedder.batch_size,
            search=config.search,
        )
    except ValueError as exc:
        fail(str(exc))
    try:
        dataset = load_locomo(data)
    except LocomoFormatError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {data}: {exc.strerror or exc}")
    embedder = create_embedder(config.embedder)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    async def run(work_dir: Path) -> Any:
        try:
            with _progress() as progress:
                return await run_locomo(dataset, embedder, work_dir, settings, _stage_reporter(progress))
        finally:
            await embedder.aclose()

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        try:
            result = asyncio.run(run(Path(tmp)))
        except LocomoRunError as exc:
            fail(str(exc), 1)
    figures = to_json(
        result, machine=machine(), started_at=started_at, embedder_config=config.embedder.model_dump(mode="json")
    )
    markdown = to_markdown(result)
    _emit(figures, out / "locomo.json")
    (out / "locomo.md").write_text(markdown, encoding="utf-8")
    console = Console(markup=False)
    console.print(f"machine: {machine()}")
    console.print(Markdown(markdown))
    console.print(f"wrote {out / 'locomo.json'} and {out / 'locomo.md'}")


@app.command("past-sessions")
def past_sessions(
    data: Annotated[Path, typer.Option(help="A LoCoMo-format JSON file with session summaries and observations.")],
    out: Annotated[Path, typer.Option(help="Directory for past_sessions.json and .md.")] = Path("bench-results"),
    exchange_texts: Annotated[str, typer.Option(help="Comma-separated exchange texts: turns, facts.")] = "turns,facts",
    names: Annotated[str, typer.Option(help="Comma-separated ways of naming the speakers: kept, neutral.")] = (
        "kept,neutral"
    ),
) -> None:
    """How similar a new message is to the summaries of the past segments holding its answer, through
    past-conversation retrieval with the configured embedder: where `rag.minSimilarity` should sit."""
    from datetime import UTC, datetime

    from rich.markdown import Markdown

    from klaw.bench.locomo.annotations import load_session_notes
    from klaw.bench.locomo.dataset import LocomoFormatError, load_locomo
    from klaw.bench.locomo.past_sessions import PastRunSettings, run_past_sessions
    from klaw.bench.locomo.past_sessions_chat import PastSessionsRunError
    from klaw.bench.locomo.past_sessions_report import to_json, to_markdown
    from klaw.cli.context import fail, home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder

    config = load_or_exit(home_from_env()).config
    try:
        settings = PastRunSettings(
            exchange_texts=tuple(t.strip() for t in exchange_texts.split(",") if t.strip()),
            names=tuple(n.strip() for n in names.split(",") if n.strip()),
            batch_size=config.embedder.batch_size,
            rag=config.rag,
        )
    except ValueError as exc:
        fail(str(exc))
    try:
        dataset = load_locomo(data)
        notes = load_session_notes(data, dataset)
    except LocomoFormatError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {data}: {exc.strerror or exc}")
    embedder = create_embedder(config.embedder)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    async def run(work_dir: Path) -> Any:
        try:
            with _progress() as progress:
                return await run_past_sessions(dataset, notes, embedder, work_dir, settings, _stage_reporter(progress))
        finally:
            await embedder.aclose()

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        try:
            result = asyncio.run(run(Path(tmp)))
        except PastSessionsRunError as exc:
            fail(str(exc), 1)
    figures = to_json(
        result, machine=machine(), started_at=started_at, embedder_config=config.embedder.model_dump(mode="json")
    )
    markdown = to_markdown(result)
    _emit(figures, out / "past_sessions.json")
    (out / "past_sessions.md").write_text(markdown, encoding="utf-8")
    console = Console(markup=False)
    console.print(f"machine: {machine()}")
    console.print(Markdown(markdown))
    console.print(f"wrote {out / 'past_sessions.json'} and {out / 'past_sessions.md'}")


@app.command()
def recall(
    data: Annotated[Path, typer.Option(help="A LoCoMo-format JSON file with session summaries and observations.")],
    out: Annotated[Path, typer.Option(help="Directory for recall.json and recall.md.")] = Path("bench-results"),
    layers: Annotated[str, typer.Option(help="Comma-separated layers: auto_rag, past.")] = "auto_rag,past",
) -> None:
    """What reaches the model: each LoCoMo question asked as a live turn, and what the auto-RAG and
    past-conversations blocks would hold with the settings in force (context recall, false injection)."""
    from datetime import UTC, datetime

    from rich.markdown import Markdown

    from klaw.bench.locomo.annotations import load_session_notes
    from klaw.bench.locomo.dataset import LocomoFormatError, load_locomo
    from klaw.bench.locomo.recall_bench import RecallSettings, run_recall
    from klaw.bench.locomo.recall_report import to_json, to_markdown
    from klaw.bench.locomo.runner import LocomoRunError
    from klaw.cli.context import fail, home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder

    config = load_or_exit(home_from_env()).config
    try:
        settings = RecallSettings(
            layers=tuple(part.strip() for part in layers.split(",") if part.strip()),
            auto_rag=config.auto_rag,
            search=config.search,
            rag=config.rag,
            sliding_window=config.context.sliding_window,
            batch_size=config.embedder.batch_size,
        )
        dataset = load_locomo(data)
        notes = load_session_notes(data, dataset)
    except (ValueError, LocomoFormatError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {data}: {exc.strerror or exc}")
    embedder = create_embedder(config.embedder)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    async def run(work_dir: Path) -> Any:
        try:
            with _progress() as progress:
                return await run_recall(dataset, notes, embedder, work_dir, settings, _stage_reporter(progress))
        finally:
            await embedder.aclose()

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        try:
            result = asyncio.run(run(Path(tmp)))
        except LocomoRunError as exc:
            fail(str(exc), 1)
    markdown = to_markdown(result)
    _emit(to_json(result, machine=machine(), started_at=started_at), out / "recall.json")
    (out / "recall.md").write_text(markdown, encoding="utf-8")
    console = Console(markup=False)
    console.print(Markdown(markdown))
    console.print(f"wrote {out / 'recall.json'} and {out / 'recall.md'}")


def _reindex_throughput(console: Console, config: Any, messages: int) -> dict[str, Any]:
    from klaw.bench.reindex_bench import measure_reindex

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, _progress() as progress:
        result = asyncio.run(
            measure_reindex(Path(tmp) / "home", config, messages=messages, progress=_stage_reporter(progress))
        )
    console.print(
        f"klaw reindex of {result.messages} messages ({result.embedded} embedded with {result.embedder}):"
        f" {result.seconds:.1f} s = {result.messages_per_s:.0f} messages/s"
        f" (rows {result.rows_per_s:.0f}/s, embedding {result.embedded_per_s:.0f}/s)"
    )
    return asdict(result)
