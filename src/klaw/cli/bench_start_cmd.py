"""`klaw bench start`: CPU, wall time and memory of `klaw engine` or `klaw serve` from exec to ready.

The work is `bench/start_bench.py`; this module is its options and its lines (decision 410)."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from klaw.cli.bench_output import emit, machine, machine_console


class StartCommand(StrEnum):
    ENGINE = "engine"
    SERVE = "serve"


class StartEmbedder(StrEnum):
    MINILM = "minilm"
    FAKE = "fake"


def start(
    command: Annotated[
        StartCommand, typer.Option(help="The command started: engine, or serve (engine and web page).")
    ] = StartCommand.ENGINE,
    runs: Annotated[int, typer.Option(min=1, max=200, help="Starts measured (after one not counted).")] = 8,
    embedder: Annotated[
        StartEmbedder, typer.Option(help="The engine's embedder: minilm (the default engine.yaml's) or fake.")
    ] = StartEmbedder.MINILM,
    against: Annotated[
        Path | None,
        typer.Option(help="Another klaw's source folder (an older checkout's src): its starts alternate with these."),
    ] = None,
    chats: Annotated[
        int, typer.Option(min=0, max=100_000, help="Idle chats (one exchange each) the home holds first.")
    ] = 0,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
) -> None:
    """Start-up of `klaw engine` (or `klaw serve`): CPU and wall time from exec to its ready line, and its
    memory then; its CPU and memory once it settled (the embedder's warm-up after the ready line included);
    medians of --runs fresh processes on one home."""
    from klaw.bench.start_bench import measure_start

    if against is not None and not (against / "klaw" / "__init__.py").is_file():
        machine_console().print(f"--against {against}: no klaw package there (klaw/__init__.py); name a checkout's src")
        raise typer.Exit(2)
    console = machine_console(soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="klaw-bench-", dir="/tmp") as tmp:  # short: a socket path
        try:
            result = asyncio.run(
                measure_start(
                    Path(tmp),
                    command=command.value,
                    runs=runs,
                    embedder=embedder.value,
                    against=None if against is None else str(against.resolve()),
                    chats=chats,
                )
            )
        except RuntimeError as exc:
            console.print(f"error: {exc}")
            raise typer.Exit(1) from None
    idle = f", {result.chats} idle chats" if result.chats else ""
    for figures in result.figures:
        name = "this klaw" if figures.source is None else figures.source
        cpu = "n/a (no /proc)" if figures.cpu_s is None else f"{figures.cpu_s:.3f} s"
        rss = "" if figures.rss_mb is None else f", resident {figures.rss_mb:.0f} MB"
        settled = (
            ""
            if figures.settled_cpu_s is None or figures.settled_rss_mb is None
            else f"; settled CPU {figures.settled_cpu_s:.3f} s, resident {figures.settled_rss_mb:.0f} MB"
        )
        console.print(
            f"klaw {result.command} (embedder {result.embedder}{idle}), {name}: to ready CPU {cpu},"
            f" wall {figures.wall_s:.3f} s{rss}{settled} (median of {len(figures.runs)})"
        )
    emit(
        {
            "machine": machine(),
            **asdict(result),
            "medians": [
                {
                    "source": f.source,
                    "cpu_s": f.cpu_s,
                    "wall_s": f.wall_s,
                    "rss_mb": f.rss_mb,
                    "settled_cpu_s": f.settled_cpu_s,
                    "settled_rss_mb": f.settled_rss_mb,
                }
                for f in result.figures
            ],
        },
        out,
    )
