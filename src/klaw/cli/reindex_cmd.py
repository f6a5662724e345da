"""`klaw reindex`: rebuild klaw.db from the conversation log, with a progress bar per stage.

The work is `klaw.memory.reindex`; this module renders its progress and its report, after finishing what an
interrupted `klaw memory forget` left in the log (memory_forget_cmd.py, decision 454).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from klaw.cli.context import fail, home_from_env, load_or_exit, print_whole, stdout_console
from klaw.console_logging import logs_through
from klaw.home import KlawHome
from klaw.log_format import held_back

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.config import EngineConfig
    from klaw.memory.reindex import ReindexReport, ReindexStage
    from klaw.store.rebuild_protocol import RebuildBackend

SHOWN_MALFORMED = 5
_LABELS = {  # by ReindexStage value (a StrEnum: its members look these up), so this module loads without it
    "read": "reading log files",
    "rebuild": "rebuilding rows",
    "embed": "embedding",
}


async def run_with_bars(
    console: Console, home: KlawHome, config: EngineConfig, backend: RebuildBackend, unchanged: str, command: str
) -> ReindexReport:
    """`reindex` into `backend` with the progress bars, its failures as one line (`unchanged`: what is
    left as it was), an interruption as how to resume (`klaw db migrate` moves a home this way)."""
    from klaw.memory.embedder.protocol import EmbedderError
    from klaw.memory.reindex import ReindexError, reindex
    from klaw.store.protocol import StorageError
    from klaw.store.rebuild_protocol import TargetRefused

    bars = _Bars(console)
    terminated = asyncio.Event()
    try:
        # `kill PID`, a service stopping: said as Ctrl-C is (decision 503)
        with _cancel_on_sigterm() as terminated, bars.progress, logs_through(console):
            return await reindex(home, config, progress=bars.update, backend=backend, command=command)
    except (KeyboardInterrupt, asyncio.CancelledError):
        how = "stopped by SIGTERM" if terminated.is_set() else "interrupted"
        console.print(Text.assemble((how, "yellow"), f"{bars.where()}: {unchanged}; run the command again to resume."))
        raise typer.Exit(143 if terminated.is_set() else 130) from None
    except (ReindexError, TargetRefused) as exc:  # again the same way would change nothing
        fail(str(exc), code=1)
    except (StorageError, EmbedderError, OSError) as exc:
        said = str(exc).rstrip(".")
        # "resume" only when a step was under way: a server refused at the first step started nothing
        again = "run the command again to resume" if bars.started else "run the command again once that is fixed"
        fail(f"{said}. {unchanged[0].upper()}{unchanged[1:]}; {again}.", code=1)


def reindex_command(
    keep_backup: Annotated[
        bool,
        typer.Option(
            "--keep-backup",
            help="Keep the old database after the swap: as klaw.db.bak-<UTC time> (on PostgreSQL: the schema"
            " klaw_backup_<UTC time>). Each run keeps its own; none is ever removed by klaw.",
        ),
    ] = False,
) -> None:
    """Rebuild the database (klaw.db, or PostgreSQL) from the log: messages, search index, segments, vectors.

    Run it after changing the embedder, or when klaw.db is damaged or lost. Stop the engine first (on
    PostgreSQL: every engine sharing the database). The log is the home's JSONL files, or on PostgreSQL
    the database's own `log_records`, rebuilt in a schema beside the live tables and swapped in.
    Interrupted (Ctrl-C), it resumes where it stopped when run again."""
    home = home_from_env()
    loaded = load_or_exit(home)
    console = stdout_console()
    bars = _Bars(console, kept_log=loaded.config.database.backend == "postgres")
    # The report names the malformed lines; a warning per line would only break the bars (-v shows them).
    # Held back only while the command runs: a program running it in its process keeps its logging (473).
    quiet = () if logging.getLogger().isEnabledFor(logging.DEBUG) else ("klaw.memory.conversation_log",)
    with held_back(*quiet):
        _reindex(home, loaded.config, console, bars, keep_backup)


def _reindex(home: KlawHome, config: EngineConfig, console: Console, bars: _Bars, keep_backup: bool) -> None:
    """The command's work: an interrupted forget finished, the rebuild under its bars, the report."""
    from klaw.cli.memory_forget_cmd import finish_interrupted_forgets
    from klaw.memory.embedder.protocol import EmbedderError
    from klaw.memory.reindex import ReindexError, reindex
    from klaw.store.protocol import StorageError

    if finished := finish_interrupted_forgets(home, config.database, "klaw reindex"):
        console.print(finished, highlight=False, markup=False, emoji=False, soft_wrap=True)  # decision 454
    terminated: list[asyncio.Event] = []

    async def work() -> ReindexReport:
        with _cancel_on_sigterm() as stopped:  # `kill PID`: said as Ctrl-C is (decision 503)
            terminated.append(stopped)
            return await reindex(home, config, progress=bars.update, keep_backup=keep_backup)

    try:
        with bars.progress, logs_through(console):  # log lines above the bars, never into them
            report = asyncio.run(work())
    except (KeyboardInterrupt, asyncio.CancelledError):
        how = "stopped by SIGTERM" if terminated and terminated[0].is_set() else "interrupted"
        console.print(
            Text.assemble(
                (how, "yellow"), f"{bars.where()}: the live database is unchanged. Run 'klaw reindex' again to resume."
            )
        )
        raise typer.Exit(143 if how != "interrupted" else 130) from None
    except ReindexError as exc:
        fail(str(exc), code=1)
    except (StorageError, EmbedderError, OSError) as exc:
        fail(f"{exc}. The live database is unchanged; run 'klaw reindex' again to resume.", code=1)
    database = config.database
    where = f"the PostgreSQL database named by {database.url_env}" if database.backend == "postgres" else None
    print_report(console, report, where or str(report.database), kept_log=where is not None)


class _StageBars(Progress):
    """Bars that leave nothing when no stage began: a refusal before the work (the home held) printed an
    empty line on stdout first, rich's last render of no bars (newcomer20)."""

    def stop(self) -> None:
        if self.tasks or self.disable:
            super().stop()
            return
        self.live.transient = True  # and not Progress.stop's blank line after bars into a file or a pipe
        self.live.stop()


def stage_bars(console: Console, *, drawn: bool = True) -> Progress:
    """A bar per stage, its label, done of total and time (reindex, and `klaw db migrate`'s check). Not `drawn`:
    counted only (`where`), never printed."""
    return _StageBars(
        TextColumn("{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not drawn,
    )


@contextlib.contextmanager
def _cancel_on_sigterm() -> Iterator[asyncio.Event]:
    """SIGTERM cancels the running task, as Ctrl-C does under `asyncio.run`: the work stops where it is, resumable,
    and says so; before, it died in silence (adversary29). The event tells that SIGTERM was the cause. Only while
    the rebuild runs: the handler is removed after it, so a SIGTERM during what the caller does next (`klaw db
    migrate`'s checks) is the default's, not a cancel of a task no longer expecting it (review54)."""
    terminated = asyncio.Event()
    task = asyncio.current_task()

    def stop() -> None:
        terminated.set()
        if task is not None:
            task.cancel()

    installed = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread (a test's)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
        installed = True
    try:
        yield terminated
    finally:
        if installed:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)


PLAIN_EVERY_SECONDS = 10.0
"""Into a file or a pipe, where rich draws no bars: a line per stage this often (adversary29 saw 0 bytes in 8 min)."""


class _Bars:
    """The rebuild's progress: rich's bars on a terminal; into a file or a pipe, plain lines only (a line per
    stage as it starts, ends, and every `PLAIN_EVERY_SECONDS`). The bars were drawn there too, once, at the
    end, so the progress was printed twice, lines then bars (newcomer24, decision 537)."""

    def __init__(self, console: Console, *, kept_log: bool = False) -> None:
        self._plain = not console.is_terminal
        self.progress = stage_bars(console, drawn=not self._plain)
        self._tasks: dict[ReindexStage, TaskID] = {}
        self._labels = {**_LABELS, "read": "reading the log"} if kept_log else _LABELS
        self._console = console
        self._said: dict[ReindexStage, float] = {}
        self._last: tuple[ReindexStage, int, int] | None = None
        self._ended: set[ReindexStage] = set()

    def where(self) -> str:
        """` at <stage> N of M`, the last step reported, or nothing."""
        if self._last is None:
            return ""
        stage, done, total = self._last
        return f" at {self._labels[stage]} {done:,} of {total:,}"

    @property
    def started(self) -> bool:
        """Whether any step reported progress (something to resume from)."""
        return bool(self._tasks)

    def update(self, stage: ReindexStage, done: int, total: int) -> None:
        task = self._tasks.get(stage)
        if task is None:
            task = self._tasks[stage] = self.progress.add_task(self._labels[stage], total=total)
        self.progress.update(task, completed=done, total=max(total, done))
        self._last = (stage, done, max(total, done))
        now, ended = time.monotonic(), done >= total and stage not in self._ended
        if self._plain and (stage not in self._said or ended or now - self._said[stage] >= PLAIN_EVERY_SECONDS):
            self._said[stage] = now
            if ended:
                self._ended.add(stage)
            self._console.print(f"{self._labels[stage]}: {done:,} of {max(total, done):,}", highlight=False)


def print_report(console: Console, report: ReindexReport, rebuilt: str, *, kept_log: bool = False) -> None:
    """The report; `rebuilt` names the store (klaw.db's path, or the PostgreSQL database's variable).
    `kept_log`: rebuilt from the log the store keeps (PostgreSQL's `log_records`), read a day at a time: no
    file to count (adversary23: "log files 1" on a home with none; decision 442)."""
    from klaw.memory.reindex import LISTED_MALFORMED

    read = "days of the log (log_records)" if kept_log else "log files"
    counts = report.counts
    table = Table(title=f"Rebuilt {rebuilt}", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [
        (read, f"{report.log_files} ({report.resumed_files} done by an earlier run)"),
        ("log records replayed", str(report.records)),
        ("messages", str(counts.messages)),
        ("control records (/new, /model, exchanges)", str(counts.control_records)),
        ("chats", str(counts.chats)),
        ("segments", str(counts.segments)),
        ("exchanges", str(counts.exchanges)),
        ("chats with a model chosen by /model", str(counts.sessions)),
        ("vectors", f"{counts.vectors} ({report.embedded} embedded now)"),
        ("malformed lines skipped", str(report.malformed)),
        ("settings kept", str(report.settings_copied)),
    ]
    for what, value in rows:
        table.add_row(what, value)
    print_whole(console, table)
    for stage in report.stages:
        rate = f" {stage.items} in" if stage.items else ""
        speed = f" ({stage.per_second:,.0f}/s)" if stage.items else ""
        console.print(f"{stage.stage.value}:{rate} {stage.seconds:.2f} s{speed}")
    console.print(f"total: {report.seconds:.2f} s")
    if report.malformed:
        console.print(
            Text.assemble((f"{report.malformed} malformed log line(s) skipped", "yellow"), " (never their content):")
        )
        for path, line, reason in report.malformed_lines[:SHOWN_MALFORMED]:
            where = "/".join(path.parts[-2:]) if kept_log else path  # log_records/<day>, not a file in the home
            console.print(f"  {where}:{line}: {reason}", highlight=False, soft_wrap=True)
        if report.malformed > SHOWN_MALFORMED:
            console.print(f"  … 'klaw log check' lists them all (the report keeps {LISTED_MALFORMED}).")
    not_embedded = counts.embedding_pending + counts.embedding_failed
    if not_embedded:
        console.print(
            Text.assemble(
                (f"{not_embedded} message(s) not embedded yet", "yellow"),
                f" ({counts.embedding_pending} pending, {counts.embedding_failed} failed):"
                " the engine retries them when it runs.",
            )
        )
        for error, jobs in counts.embedding_errors[:SHOWN_MALFORMED]:
            console.print(f"  {jobs} × {error}", highlight=False, soft_wrap=True)
    for warning in report.warnings:
        console.print(Text.assemble(("warning:", "yellow"), f" {warning}"), highlight=False)
    if report.backup is not None:
        console.print(f"the old database is kept: {report.backup} (klaw never removes it; delete it when done)")
