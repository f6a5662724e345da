"""`klaw bench …`: measured figures for speed and cost targets (never timed unit tests).

The LoCoMo family (`locomo`, `past-sessions`, `recall`) lives in `bench_locomo_cmd.py`, `scale` in
`bench_scale_cmd.py`, `start` in `bench_start_cmd.py`, `turn` in `bench_turn_cmd.py`; the progress bars and
JSON output they share live in `bench_output.py`.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from klaw import event_loop
from klaw.cli.bench_locomo_cmd import locomo, past_sessions, recall
from klaw.cli.bench_output import emit as _emit
from klaw.cli.bench_output import machine, machine_console
from klaw.cli.bench_output import progress as _progress
from klaw.cli.bench_output import stage_reporter as _stage_reporter
from klaw.cli.bench_scale_cmd import scale
from klaw.cli.bench_start_cmd import start
from klaw.cli.bench_turn_cmd import turn

app = typer.Typer(
    rich_markup_mode="markdown", help="Benchmarks: embedder throughput, vector search latency, …", no_args_is_help=True
)


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
    console = machine_console()
    console.print(
        f"{result.rows} rows in {result.chats} chat(s), dim {result.dim}, k={result.k};"
        f" insert {result.insert_rows_per_s:.0f} rows/s"
    )
    console.print(f"store KNN (messages fetched):     {result.knn}   recall@k vs exact: {result.recall_at_k:.3f}")
    console.print(f"numpy brute-force floor:          {result.numpy_floor}")
    console.print(f"FTS5 bm25:                        {result.full_text}")
    _emit({"machine": machine(), **asdict(result)}, out)


app.command()(scale)
app.command()(start)
app.command()(turn)


@app.command()
def embed(
    texts: Annotated[int, typer.Option(help="Sentences to embed per batch size.")] = 512,
    runtime: Annotated[
        list[str] | None,
        typer.Option(
            metavar="RUNTIME", help="minilm runtimes to compare (repeatable; default numpy, onnx-fp32 and onnx-int8)."
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Embedder speed: one sentence at a time and batches of 64, for each local runtime side by side
    (the configured embedder alone when it is not minilm)."""
    from klaw.bench.embedder_bench import benchmark_sentences, compared_embedders, measure_embedder, summary_line
    from klaw.cli.context import fail, home_from_env, load_or_exit
    from klaw.memory.embedder.protocol import EmbedderError

    home = home_from_env(must_exist=False)
    config = load_or_exit(home).config
    try:
        embedders = compared_embedders(config.embedder, home.embedder_cache, runtime)
    except ValueError as exc:
        fail(str(exc))
    sentences = benchmark_sentences(texts)
    console = machine_console()

    async def run(label: str, embedder: Any) -> Any:
        try:
            with _progress() as progress:
                task = progress.add_task(f"embedding with {label}", total=None)
                return await measure_embedder(
                    embedder, texts=sentences, progress=lambda done: progress.update(task, completed=done)
                )
        finally:
            await embedder.aclose()

    results: list[dict[str, Any]] = []
    for label, embedder in embedders:
        try:
            result = asyncio.run(run(label, embedder))
        except EmbedderError as exc:  # e.g. onnxruntime not installed: the other runtimes still run
            console.print(f"{label:<10} not measured: {exc}")
            results.append({"runtime": label, "error": str(exc)})
            continue
        console.print(summary_line(label, result))
        results.append({"runtime": label, **asdict(result)})
    _emit({"machine": machine(), "runs": results}, out)


@app.command()
def summaries(
    turns: Annotated[int, typer.Option(help="Turns of the scripted conversation.")] = 200,
    seconds_between_turns: Annotated[float, typer.Option(help="Engine-clock seconds between two turns.")] = 30.0,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=VALUE",
            help="A summarizer setting for the run, NAME=VALUE as in engine.yaml (repeatable).",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Background summarization calls per chat turn, and what the summaries cover, over a scripted
    conversation through the real engine (in-process model answering turns and summaries)."""
    from klaw.bench.summary_bench import measure_summaries

    overrides = _summarizer_settings(setting or [])
    console = machine_console()
    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp, _progress() as progress:
        result = asyncio.run(
            measure_summaries(
                Path(tmp) / "home",
                turns=turns,
                seconds_between_turns=seconds_between_turns,
                summarizer=overrides,
                progress=_stage_reporter(progress),
            )
        )
    kinds = ", ".join(f"{n} {kind}" for kind, n in result.turns_by_kind.items())
    calls = ", ".join(f"{n} {kind}" for kind, n in result.calls_by_kind.items()) or "none"
    console.print(f"{result.turns} turns ({kinds}), {result.seconds_between_turns:g} s apart")
    console.print(f"summary requests: {result.calls} ({calls}) = {result.calls_per_turn:.2f} per turn")
    console.print(
        f"coverage: exchanges with a summary {result.exchanges_covered:.3f} of {result.exchanges};"
        f" facts in their exchange's summary {result.facts_in_exchange_summaries:.3f},"
        f" in the segment's final summary {result.facts_in_segment_summary:.3f} (of {result.facts})"
    )
    console.print(
        f"exchanges not yet in the rolling summary after a turn: p50 {result.lag_p50:g}, max {result.lag_max}"
        f" (the sliding window holds {result.window_exchanges})"
    )
    _emit({"machine": machine(), **asdict(result)}, out)


def _summarizer_settings(settings: list[str]) -> dict[str, Any]:
    """`--set batchExchanges=1` → {"batchExchanges": 1}, checked as engine.yaml's summarizer section is."""
    import json

    from pydantic import ValidationError

    from klaw.config import SummarizerConfig

    overrides: dict[str, Any] = {}
    for item in settings:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{item!r}: write NAME=VALUE, e.g. batchExchanges=1", param_hint="--set")
        try:
            overrides[name.strip()] = json.loads(value)
        except ValueError:
            overrides[name.strip()] = value
    try:
        SummarizerConfig.model_validate(overrides)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise typer.BadParameter(f"not a valid summarizer setting ({problems})", param_hint="--set") from None
    return overrides


class LoadEmbedder(StrEnum):
    FAKE = "fake"
    MINILM = "minilm"
    E5 = "e5"


MAX_LOAD_CHATS = 250
"""A connection a chat, below the engine's `socket_limits.MAX_CONNECTIONS` (256) with room left for the
bench's own observer and a person's `klaw` command; a number here, since a command that starts no engine
loads none of its modules (tests/cli/test_cli_startup.py; tests/cli/test_cli.py checks it stays below)."""


@app.command()
def load(
    chats: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_LOAD_CHATS,
            help="Chats sending at once, each on its own socket connection (the engine takes 256 at most).",
        ),
    ] = 50,
    seconds: Annotated[float, typer.Option(help="How long the chats keep sending.")] = 20.0,
    debounce_ms: Annotated[int, typer.Option("--debounce-ms", help="processing.debounceMs of the engine.")] = 0,
    kill_after: Annotated[
        float | None, typer.Option(help="SIGKILL the engine this many seconds in, then start it again.")
    ] = None,
    embedder: Annotated[
        LoadEmbedder,
        typer.Option(
            help="The engine's embedder: fake (the engine's own cost) or a local model (memory with it loaded)."
        ),
    ] = LoadEmbedder.FAKE,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Many chats through a real `klaw engine`'s socket (model: zero-delay fake server): turns/s, send → reply
    p50/p95, whether acknowledged = stored = answered (optionally across a SIGKILL and restart), and the
    engine's memory after the load."""
    from klaw.bench.load_bench import measure_load

    console = machine_console(soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="klaw-bench-", dir="/tmp") as tmp:  # short: a socket path
        result = asyncio.run(
            measure_load(
                Path(tmp) / "home",
                chats=chats,
                seconds=seconds,
                debounce_ms=debounce_ms,
                kill_after=kill_after,
                embedder=embedder.value,
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
    if result.rss_mb is not None:
        console.print(
            f"engine memory (embedder {result.embedder}): {result.rss_mb:.0f} MB resident once every reply was in,"
            f" peak {result.peak_rss_mb:.0f} MB"
            + (f"; its own {result.own_mb:.0f} MB, the rest files it maps" if result.own_mb else "")
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

    console = machine_console(soft_wrap=True, markup=True)
    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        result = asyncio.run(measure_warm(Path(tmp), chats=chats, per_chat=per_chat, dim=dim))
    console.print(
        f"{result.chats} chats x {result.per_chat} vectors ({result.dim} dims): warm_cache {result.warm_seconds:.2f} s,"
        f" {result.chats_loaded} chats loaded"
    )
    _emit({"machine": machine(), **asdict(result)}, out)


@app.command()
def sandbox(
    runs: Annotated[int, typer.Option(help="Calls timed per language.")] = 50,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Start-up overhead of code_execute: a trivial call (shell `true`, Python print) timed end to end."""
    from klaw.bench.sandbox_bench import measure_sandbox
    from klaw.cli.context import home_from_env, load_or_exit
    from klaw.config import EngineConfig
    from klaw.tools.sandbox.backend import Unavailable

    home = home_from_env(must_exist=False)
    config = load_or_exit(home).config if home.config_file.exists() else EngineConfig()
    console = machine_console(soft_wrap=True, markup=True)
    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        result = asyncio.run(measure_sandbox(Path(tmp), config.sandbox, runs))
    if isinstance(result, Unavailable):
        console.print(f"no sandbox here: {result.reason}")
        raise typer.Exit(1)
    console.print(f"backend {result.backend}: shell true {result.shell_true}; python print {result.python_print}")
    _emit({"machine": machine(), **asdict(result)}, out)


@app.command()
def send(
    runs: Annotated[int, typer.Option(help="Calls timed (after 20 warm-up calls).")] = 300,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """What one message_send costs the engine: the tool call through the registry, caps, record and delivery."""
    from klaw.bench.send_bench import measure_send

    console = machine_console(soft_wrap=True, markup=True)
    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        result = event_loop.run(measure_send(Path(tmp), runs))  # the engine's own loop
    console.print(f"message_send to an in-process channel: {result.send}")
    _emit({"machine": machine(), **asdict(result)}, out)


# The LoCoMo family, registered last so `klaw bench --help` lists the speed benchmarks first.
app.command()(locomo)
app.command("past-sessions")(past_sessions)
app.command()(recall)
