"""`klaw bench scale`: auto-RAG latency at 10k/100k (1M) messages on SQLite, PostgreSQL or both side by side.

With several `--backend`s each size is measured on each backend in turn, in the same run, so the figures
share the machine's load of the same minutes; a last line sets PostgreSQL's auto-RAG p50 against
SQLite's. PostgreSQL is the database whose connection string the variable `--url-env` names (default:
the home's `database.urlEnv`, else KLAW_DATABASE_URL); the chat is built in a schema of its own,
dropped after (`bench/bench_store.py`).
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from klaw.cli.bench_backends import SideBySide, UrlEnvOption, backend_databases, unusable_backend
from klaw.cli.bench_output import emit, machine, print_whole, progress, stage_reporter
from klaw.cli.context import stdout_console

REINDEX_DEFAULT_CAP = 5000
"""The reindex part's default size when no --size asks for less (a quick `--size 2000` run spent most of
its time reindexing 5000 messages)."""


def scale(
    size: Annotated[
        list[int] | None,
        typer.Option(metavar="N", help="Messages in the bench chat (repeatable; default 10k and 100k)."),
    ] = None,
    backend: SideBySide = None,
    url_env: UrlEnvOption = None,
    queries: Annotated[int, typer.Option(help="Queries timed per size.")] = 200,
    past_segments: Annotated[
        int, typer.Option(help="Past conversations (20 summarized exchanges each) written before the chat.")
    ] = 500,
    past_share: Annotated[
        float,
        typer.Option(
            help="Share of each size's messages written in the past segments, evenly (e.g. 0.98: a large past,"
            " a small current segment; default 0: all in the current one)."
        ),
    ] = 0.0,
    vector_cache_mb: Annotated[int, typer.Option(help="database.vectorCacheMb for the run.")] = 512,
    reindex_size: Annotated[
        int | None,
        typer.Option(
            help="Messages in the home reindexed for throughput (0 = skip; default: the largest --size, at most"
            f" {REINDEX_DEFAULT_CAP})."
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Auto-RAG search latency at 10k/100k messages (with and without the query embedding) beside a
    numpy floor, and `klaw reindex` throughput, with the configured embedder."""
    from klaw.bench.scale_bench import measure_scale
    from klaw.cli.context import home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder
    from klaw.store.protocol import StorageError

    home = home_from_env(must_exist=False)
    config = load_or_exit(home).config
    if not 0.0 <= past_share < 1.0 or (past_share > 0 and past_segments <= 0):
        raise typer.BadParameter(
            "give a share at least 0 and below 1, with --past-segments 1 or more to hold it", param_hint="--past-share"
        )
    databases = backend_databases(config.database, backend or ["sqlite"], url_env, vector_cache_mb=vector_cache_mb)
    backends = list(databases)
    console = stdout_console()
    unusable = unusable_backend(databases)  # before anything is built: a missing variable is named at once
    if unusable is not None:
        console.print(f"klaw bench scale on {unusable}")
        raise typer.Exit(1)
    console.print(f"machine: {machine()}")
    results: dict[str, Any] = {"machine": machine(), "embedder": config.embedder.backend, "search": []}
    sizes = size or [10_000, 100_000]
    for messages in sizes:
        p50: dict[str, float] = {}
        for name in backends:
            embedder = create_embedder(config.embedder, cache_dir=home.embedder_cache)
            with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, progress() as bars:
                report = stage_reporter(bars, f"{name}, {messages} messages: ")
                try:
                    result = asyncio.run(
                        measure_scale(
                            Path(tmp) / "bench.db",
                            embedder,
                            messages=messages,
                            queries=queries,
                            database=databases[name],
                            past_segments=past_segments,
                            past_share=past_share,
                            progress=report,
                        )
                    )
                except StorageError as exc:
                    console.print(f"klaw bench scale on {name}: {exc}")
                    raise typer.Exit(1) from exc
                finally:
                    asyncio.run(embedder.aclose())
            results["search"].append(asdict(result))
            p50[name] = result.search_without_embedding.p50_ms
            console.print(_figures(result))
            print_whole(console, _against_floors(result))
        if len(p50) == 2:
            console.print(
                f"{messages} messages: auto-RAG p50 without query embedding on PostgreSQL is"
                f" {p50['postgres'] / p50['sqlite']:.1f}x SQLite's ({p50['postgres']:.1f} against"
                f" {p50['sqlite']:.1f} ms; machine now: {machine()})"
            )
    if reindex_size is None:  # a quick run stays quick: the reindex part is no larger than the search part
        reindex_size = min(max(sizes), REINDEX_DEFAULT_CAP)
    if reindex_size > 0:
        console.print(
            f"klaw reindex throughput: a throwaway SQLite home of {reindex_size} messages (--reindex-size; 0 skips it)"
        )
        results["reindex"] = _reindex_throughput(console, config, reindex_size)
    emit(results, out)


def _figures(result: Any) -> str:
    """Every figure of one size on one backend; the int8 copy's save and reload are SQLite's only."""
    lines = [
        f"{result.messages} messages on {result.backend} (dim {result.dim}, built at"
        f" {result.build_rows_per_s:.0f} rows/s):",
        f"  auto-RAG search without query embedding: {result.search_without_embedding}",
        f"    its CPU, all threads (on n CPUs it takes at least this / n): {result.search_cpu}",
        *_split_lines(result.split),
        f"  auto-RAG search with query embedding:    {result.search_with_embedding}",
        f"  query embedding alone:                   {result.query_embedding}",
        f"  numpy brute-force floor (KNN only):      {result.numpy_floor} on 1 thread;"
        f" {result.numpy_floor_threaded} on {result.search_threads} (as the search)",
        f"  first search (loads the chat's vectors): {result.first_search_ms:.0f} ms;"
        f" {result.recalled_per_query:.1f} messages recalled per query",
        f"  past conversations without query embedding ({result.past_segments} past segments holding"
        f" {result.past_messages} messages, {result.summaries} summaries, {result.past_shown_per_query:.1f} shown):"
        f" {result.past_conversations}",
        f"  all retrieval layers (auto-RAG + past conversations) without query embedding: {result.all_layers}",
        f"  vector search: recall@20 {result.recall_at_20:.3f} against exact float search;"
        f" {result.vector_bytes / 1e6:.0f} MB in klaw's memory; {result.scanned_bytes_per_query / 1e6:.1f} MB"
        f" scanned per query = {result.bandwidth_floor_ms:.2f} ms at the measured {_bandwidth(result)}",
    ]
    if result.full_text_segments is not None:
        after_fill, after_merge = result.full_text_segments
        lines.append(
            f"  full-text index: {after_fill} segments after the fill, {after_merge} after merging them as the"
            f" engine does in the background ({result.full_text_merge_s:.1f} s)"
        )
    if result.save_ms is not None and result.reload_first_search_ms is not None:
        lines.append(
            f"  closing (saves the int8 copy): {result.save_ms:.0f} ms; first search after opening again:"
            f" {result.reload_first_search_ms:.0f} ms"
        )
    return "\n".join(lines)


def _against_floors(result: Any) -> Any:
    """The search and its parts drawn beside the floors it cannot beat (the numpy scan as the search
    splits it, the bytes it scans at the measured bandwidth), so the distance to each shows."""
    from klaw.bench.bars import floor, latency_table

    rows = {"auto-RAG search (without query embedding)": result.search_without_embedding}
    if result.split is not None:
        rows |= {
            "search.vector side": result.split.vector_side,
            "search.full-text side": result.split.full_text_side,
            "search.neighbours": result.split.neighbours,
            "search.the rest": result.split.rest,
        }
    threaded = result.numpy_floor_threaded
    rows[f"numpy KNN floor, {result.search_threads if threaded else 1} thread(s)"] = threaded or result.numpy_floor
    rows["memory-bandwidth floor of its scan"] = floor(result.bandwidth_floor_ms)
    rows["query embedding (beside, when asked)"] = result.query_embedding
    return latency_table(f"{result.messages} messages on {result.backend}: a search against its floors (ms)", rows)


def _split_lines(split: Any) -> list[str]:
    """Where the search without the query embedding waits: its two sides run at once (decision 235)."""
    if split is None:
        return []
    return [
        f"    of it, vector side (KNN, at once with full text): {split.vector_side}",
        f"    of it, full-text side (bm25):                   {split.full_text_side}",
        f"    of it, neighbours with their rows:              {split.neighbours}",
        f"    of it, the rest (fusion, ranking, hops):        {split.rest}",
        f"    the search waits for: {split.long_pole()}",
    ]


def _bandwidth(result: Any) -> str:
    measured = result.bandwidth
    return (
        f"{measured.threaded_gb_s:.1f} GB/s on {measured.threads} threads ({measured.one_thread_gb_s:.1f} on one,"
        " numpy copy, bytes read + written)"
    )


def _reindex_throughput(console: Console, config: Any, messages: int) -> dict[str, Any]:
    from klaw.bench.reindex_bench import measure_reindex

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, progress() as bars:
        result = asyncio.run(
            measure_reindex(Path(tmp) / "home", config, messages=messages, progress=stage_reporter(bars))
        )
    console.print(
        f"klaw reindex of {result.messages} messages ({result.embedded} embedded with {result.embedder}):"
        f" {result.seconds:.1f} s = {result.messages_per_s:.0f} messages/s"
        f" (rows {result.rows_per_s:.0f}/s, embedding {result.embedded_per_s:.0f}/s)"
    )
    return asdict(result)
