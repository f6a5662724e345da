"""`klaw bench turn`: a whole turn through a real engine, timed phase by phase, on SQLite, PostgreSQL or both
side by side (`bench/turn_bench.py`).

With several `--backend`s each size is measured on each backend in turn, in the same run, so the figures share
the machine's load of the same minutes, and a last table sets each phase's p50 and p95 side by side.
PostgreSQL is the database whose connection string the variable `--url-env` names (default: the home's
`database.urlEnv`, else KLAW_DATABASE_URL); the engine's tables are made in a schema of their own, dropped
after, however the run ends (`bench/bench_store.py`), so a person's own tables are never touched.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from klaw import event_loop
from klaw.cli.bench_backends import SideBySide, UrlEnvOption
from klaw.cli.bench_output import emit, machine, machine_console, print_whole, progress, stage_reporter


def turn(
    stored: Annotated[
        list[int] | None, typer.Option(metavar="N", help="Stored messages in the chat before timing (repeatable).")
    ] = None,
    turns: Annotated[int, typer.Option(help="Sequential turns timed per size.")] = 200,
    chats: Annotated[int, typer.Option(help="Concurrent chats in the throughput phase.")] = 50,
    chat_turns: Annotated[int, typer.Option(help="Turns each chat takes in the throughput phase.")] = 4,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
    embedder: Annotated[
        str, typer.Option(help="fake (hashed words: klaw's own overhead) or minilm (the local model's embeddings too).")
    ] = "fake",
    backend: SideBySide = None,
    url_env: UrlEnvOption = None,
) -> None:
    """Engine overhead per turn (context build + bookkeeping; model = zero-delay fake server in a process
    of its own that answers summary requests as their prompts ask, numbered lines for a batch), and the
    CPU time a turn costs the engine's process with many chats at once. On PostgreSQL the engine's tables
    are made in a schema of their own (`klaw_bench_<pid>`), dropped after."""
    from klaw.bench.bench_store import engine_database
    from klaw.bench.turn_bench import measure_turns, phase_comparison, phase_table
    from klaw.bench.turn_fill import BENCH_VERSION
    from klaw.cli.bench_backends import backend_databases, unusable_backend
    from klaw.cli.context import home_from_env, load_or_exit
    from klaw.config import EngineConfig
    from klaw.start_up_heap import keep_start_up_heap
    from klaw.store.protocol import StorageError

    if embedder not in ("fake", "minilm"):
        raise typer.BadParameter(f"{embedder!r} is not one of fake, minilm", param_hint="--embedder")
    home = home_from_env(must_exist=False)
    config = load_or_exit(home).config if home.config_file.exists() else EngineConfig()
    databases = backend_databases(config.database, backend or ["sqlite"], url_env)
    console = machine_console()
    unusable = unusable_backend(databases)  # before anything is built: a missing variable is named at once
    if unusable is not None:
        console.print(f"klaw bench turn on {unusable}")
        raise typer.Exit(1)
    console.print(
        "model: zero-delay fake server in its own process; summary requests answered as their prompts ask"
        " (numbered lines)"
    )
    console.print(
        f"bench version {BENCH_VERSION}: the stored chat written as turns leave it (exchanges, summaries, Zipfian"
        " text, every message's vector) and varied questions; figures from before version 2 measured another chat"
        " (decision 434), before version 3 a chat without message vectors (decision 493)"
    )
    results = []
    for size in stored or [1_000, 100_000]:
        phases = {}
        for name, database in databases.items():
            with (
                tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp,
                progress() as bars,
                engine_database(database) as engine_db,
            ):
                report = stage_reporter(bars, f"{name}, {size} stored: ")
                try:
                    result = event_loop.run(
                        measure_turns(
                            Path(tmp) / "home",
                            stored=size,
                            turns=turns,
                            concurrent_chats=chats,
                            turns_per_chat=chat_turns,
                            progress=report,
                            embedder=embedder,
                            after_start=keep_start_up_heap,  # as klaw engine does once started (decision 303)
                            database=engine_db,
                        )
                    )
                except StorageError as exc:
                    console.print(f"klaw bench turn on {name}: {exc}")
                    raise typer.Exit(1) from exc
            results.append(asdict(result))
            phases[name] = result.phases
            console.print(_turn_line(size, result))
            print_whole(console, phase_table(size, result.phases, title=f"{name}: "))
        if len(phases) > 1:
            print_whole(console, phase_comparison(size, phases))
    emit({"machine": machine(), "results": results}, out)


def _turn_line(size: int, result: Any) -> str:
    return (
        f"{result.backend}, {size} stored messages: turn {result.turn}; context build alone (after the turns;"
        f" the table's context is inside them) {result.context_build};"
        f" fake LLM round trip {result.fake_llm_round_trip};"
        f" {result.concurrent_chats} concurrent chats: {result.turns_per_second:.1f} turns/s,"
        f" CPU per turn {result.cpu_ms_per_turn:.1f} ms in the engine's process"
        f" (its event loop, {result.event_loop}, {result.loop_cpu_ms_per_turn:.1f} ms;"
        f" the garbage collector {result.gc_ms_per_turn:.2f} ms)"
        f" ({result.model_cpu_ms_per_turn:.1f} ms in the model's);"
        f" background model calls per turn {result.background_model_calls_per_turn:.2f};"
        f" embedder ({result.embedder}) texts per turn {result.embedded_texts_per_turn:.2f};"
        f" stored message vectors {result.stored_vectors}, auto-RAG hits found by vector per turn"
        f" {result.vector_hits_per_turn:.2f}"
    )
