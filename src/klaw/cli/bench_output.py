"""What every `klaw bench` command shares: rich progress bars per stage, the machine's description, JSON output."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from klaw.cli.context import print_whole as print_whole  # where the bench commands import it from
from klaw.cli.context import stderr_console, stdout_console


def progress() -> Progress:
    """Bars that vanish when done, so the figures printed after them stand alone."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    )


def stage_reporter(progress: Progress, prefix: str = "") -> Callable[[str, int, int], None]:
    """A progress callback that shows one bar per stage name. Into a file or a pipe rich draws no bars (a
    `klaw bench locomo … > file` said nothing for 8 minutes: newcomer20): a line on stderr instead when a
    stage begins, at each tenth of it and when it ends."""
    tasks: dict[str, TaskID] = {}
    said: dict[str, int] = {}
    lines = None if progress.console.is_terminal else stderr_console()

    def report(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(f"{prefix}{stage}", total=total)
        progress.update(tasks[stage], completed=done)
        if lines is not None:
            tenth = 10 * done // total if total > 0 else 0
            if said.get(stage) != tenth:
                said[stage] = tenth
                lines.print(f"{prefix}{stage}: {done}/{total}", highlight=False)

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


def emit(result: dict[str, Any], out: Path | None) -> None:
    """Write the figures as JSON (for comparing runs), when `--out` names a file."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
