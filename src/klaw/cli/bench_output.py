"""What every `klaw bench` command shares: rich progress bars per stage, the machine's description, JSON output."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from klaw.cli.context import stdout_console


def progress() -> Progress:
    """Bars that vanish when done, so the figures printed after them stand alone."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    )


def stage_reporter(progress: Progress, prefix: str = "") -> Callable[[str, int, int], None]:
    """A progress callback that shows one bar per stage name."""
    tasks: dict[str, TaskID] = {}

    def report(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(f"{prefix}{stage}", total=total)
        progress.update(tasks[stage], completed=done)

    return report


def machine() -> str:
    """The machine a figure was measured on, printed beside every figure."""
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}{load}"


def machine_console(*, markup: bool = False, soft_wrap: bool = False) -> Console:
    """The console a bench command prints to, its first line the machine the figures come from."""
    console = stdout_console(markup=markup)
    console.soft_wrap = console.soft_wrap or soft_wrap
    console.print(f"machine: {machine()}")
    return console


def print_whole(console: Console, table: RenderableType) -> None:
    """Print `table` whole: on a terminal at its width (rich wraps the cells), into a pipe or a file at the
    table's own width, however wide. There rich's default of 80 columns cut the side-by-side tables' headers
    and names ("postgres/s…", "system_…": newcomer15), and no one can widen a file afterwards."""
    if console.is_terminal:
        console.print(table)
        return
    widest = Measurement.get(console, console.options.update_width(100_000), table).maximum
    width = console.width
    console.width = max(width, widest)
    try:
        console.print(table)
    finally:
        console.width = width


def emit(result: dict[str, Any], out: Path | None) -> None:
    """Write the figures as JSON (for comparing runs), when `--out` names a file."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
