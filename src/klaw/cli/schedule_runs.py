"""`klaw schedule runs NAME`: a task's latest runs as its log holds them, for the person.

A task's runs are logged under `conversations/scheduler_<task>/` as JSONL (memory/subagent_history.py),
which nobody should have to read raw to learn what a task did (newcomer13: `klaw schedule` offered only
list, add and remove, and `list` gives the last run's minute and status). Each run is shown with when it
started and ended, how it ended, the tools it called (as a chat shows them) and its answer, newest last.
A log kept after `klaw schedule remove` is still shown; the text is shown with its control characters
visible, never obeyed (terminal_text.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import tzinfo
from typing import TYPE_CHECKING, Annotated

import typer

from klaw.cli.context import fail, home_from_env, load_or_exit
from klaw.store.records import MessageRecord
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from klaw.scheduling.task_store import ScheduledTask


def runs(
    name: Annotated[str, typer.Argument(help="The task whose runs to show.")],
    last: Annotated[int, typer.Option("--last", min=1, max=100, help="How many of its latest runs.")] = 5,
) -> None:
    """A task's latest runs from its log: when each ran, how it ended, the tools it called, its answer."""
    from klaw.cli.schedule_engine import file_of_this_klaw
    from klaw.memory.subagent_history import SubagentHistoryLoader
    from klaw.scheduling.names import InvalidTaskName, validate_task_name
    from klaw.scheduling.zones import scheduler_zone

    home = home_from_env()
    zone = scheduler_zone(load_or_exit(home).config.scheduler.timezone)
    file_of_this_klaw(home)  # a newer klaw's file is not read (decision 542)
    try:
        validate_task_name(name)
    except InvalidTaskName as exc:
        fail(str(exc))
    loader = SubagentHistoryLoader(home.conversations)
    logged = loader.task_dir(name).is_dir()
    tasks = _tasks(home.scheduler_db, logged)
    task = next((task for task in tasks if task.name == name), None)
    met = _last_note(home.scheduler_db, task, zone)
    if not logged:
        if task is not None and task.last_run_at is None:  # not an error: it is to come (newcomer21, 502)
            when = f"{task.next_run_at.astimezone(zone):%Y-%m-%d %H:%M:%S} ({zone})" if task.next_run_at else None
            typer.echo(f"Task {name} has not run yet; its next run is {when or 'set when the engine next looks'}.")
            return
        if met:  # it never started a run (could not start, capped): no log, but words (decision 510)
            typer.echo(f"Task {name} has no run logged. {met}")
            return
        names = ", ".join(task.name for task in tasks)
        known = f"the tasks are: {names}" if names else "there are no scheduled tasks (klaw schedule add)"
        fail(f"no run of a task named {name!r} is logged; {known}", code=1)
    shown = asyncio.run(loader.load_runs(name, last))
    under_way = asyncio.run(loader.has_unfinished_run(name))
    if not shown and not under_way:
        typer.echo(f"Task {name} has no finished run logged yet." + (f" {met}" if met else ""))
        return
    typer.echo(f"The last {len(shown)} run(s) of task {name}, oldest first (times in {zone}):")
    for run in shown:
        typer.echo("")
        typer.echo(_run_text(run, zone))
    if under_way:
        typer.echo("")
        typer.echo("A run after these is under way, or klaw stopped before it finished (its answer is not logged).")
    if met:
        typer.echo("")
        typer.echo(met)


def _run_text(run: Sequence[MessageRecord], zone: tzinfo) -> str:
    """A run's heading (start, end, status), its tools line when it called any, and its answer indented."""
    from klaw.engine.history_tools import record_runs
    from klaw.engine.tools_used import tools_used

    final = run[-1]
    status = str((final.metadata or {}).get("run_status", "completed"))
    start, end = run[0].created_at.astimezone(zone), final.created_at.astimezone(zone)
    seconds = (final.created_at - run[0].created_at).total_seconds()
    lines = [f"{start:%Y-%m-%d %H:%M:%S} – {end:%H:%M:%S} ({seconds:.0f} s)  {status}"]
    if called := record_runs(run):  # "(denied)", "(not run)" as a chat marks them
        lines.append("  " + visible(tools_used(called)))
        if any(call.endswith(" (denied)") for call in called):  # as `klaw schedule list` says it (decision 526)
            lines[0] += ", a tool denied"
    lines += ["  " + line for line in visible(final.content).splitlines() or [""]]
    return "\n".join(lines)


def _tasks(scheduler_db: object, logged: bool) -> list[ScheduledTask]:
    """The scheduled tasks: for a name that has no log (it may be one still to run, or a typo), and for the
    last run's note (decision 510). With a log to show, a scheduler.db that cannot be read is passed over:
    the runs are in the log, and a damaged file stopped the command that showed them (review55, decision 517);
    without one, its error says what to do (`klaw schedule list`'s words)."""
    import sqlite3
    from pathlib import Path

    from klaw.scheduling.task_store import ScheduleStore

    path = Path(str(scheduler_db))
    try:
        return ScheduleStore(path).list_read_only() if path.exists() else []
    except sqlite3.Error:
        if not logged:
            raise
        return []


def _last_note(scheduler_db: object, task: ScheduledTask | None, zone: tzinfo) -> str:
    """What the task's last run met that its status does not say (its replies reach nobody, its model refused,
    it could not start), in words, as the scheduler recorded it; "" when nothing (decision 510)."""
    from pathlib import Path

    from klaw.scheduling.task_store import ScheduleStore

    if task is None or task.last_run_at is None:
        return ""
    note = ScheduleStore(Path(str(scheduler_db))).last_notes().get(task.name)
    if not note:
        return ""
    return f"Its last run ({task.last_run_at.astimezone(zone):%Y-%m-%d %H:%M:%S}, {task.last_status}): {visible(note)}"
