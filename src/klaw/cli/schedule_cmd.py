"""`klaw schedule list|add|remove|runs`: the scheduled tasks in `scheduler.db`, for the person.

The command edits the file directly when no engine runs; beside a running one, `remove` is asked of it
(so a removed task never fires again) and `add` tells it to read the file now (decision 526).
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from klaw.cli.context import fail, home_from_env, load_or_exit, stderr_console, table_console
from klaw.cli.schedule_engine import (
    NOT_TOLD,
    OLDER,
    RESTART,
    ask_engine,
    engine_schema,
    file_of_this_klaw,
    library_holder,
    older_engine,
    run,
)
from klaw.cli.schedule_runs import runs
from klaw.disk_trouble import disk_trouble, unwritable
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.home import KlawHome
    from klaw.scheduling.task_store import ScheduledTask
    from klaw.store.records import ChatRef

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Scheduled tasks: background agent runs on a cron schedule, an interval, or once at a time.",
    no_args_is_help=True,
)


@app.command("list")
def list_tasks() -> None:
    """Every task: schedule, next and last run, model, the chat it reports to, its message."""
    from klaw.engine_presence import engine_answers
    from klaw.scheduling.task_store import SCHEMA_VERSION, ScheduleStore
    from klaw.scheduling.zones import scheduler_zone

    home = home_from_env()
    zone = scheduler_zone(load_or_exit(home).config.scheduler.timezone)
    if not home.scheduler_db.exists():
        typer.echo("No scheduled tasks.")
        return
    store = ScheduleStore(home.scheduler_db)
    version = file_of_this_klaw(home)
    if version < SCHEMA_VERSION and asyncio.run(engine_answers(home.socket_path)):
        tasks = store.list_read_only()  # an engine older than this klaw reads it: not migrated under it (542)
    elif unwritable(home.root, (home.scheduler_db,)) is None:
        try:
            store.create()  # brings a file of an older klaw up to date (idempotent)
            tasks = store.list()
        except (sqlite3.Error, OSError) as exc:
            if disk_trouble(home.scheduler_db, exc) is None:
                raise
            tasks = store.list_read_only()  # a full disk: a listing reads all the same (decision 431)
    else:  # a read-only home: a listing reads, as `memory list` does (its words come if reading fails too)
        tasks = store.list_read_only()
    if not tasks:
        typer.echo("No scheduled tasks.")
        return
    table = Table(title=f"Scheduled tasks (times in {zone})")
    columns = ("name", "schedule", "next run", "last run", "model", "reports to", "message")
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column in ("next run", "last run"))  # a date is never cut
    rows: list[tuple[str, ...]] = []
    for task in tasks:
        last = f"{_local(task.last_run_at, zone)} ({task.last_status})" if task.last_run_at else "-"
        rows.append(
            (
                task.name,
                task.schedule.describe(zone) + (" (done)" if _done(task) else ""),
                _local(task.next_run_at, zone),
                last,
                task.model or "(subagent default)",
                str(task.inject_into) if task.inject_into else "(only logged)",
                visible(task.message)
                + (f" (may run without asking: {', '.join(task.allowed_tools)})" if task.allowed_tools else ""),
            )
        )
        table.add_row(*rows[-1])
    widths = [max(len(cell) for cell in cells) for cells in zip(columns, *rows, strict=True)]
    table_console(sum(width + 3 for width in widths) + 1).print(table)  # each cell padded and bordered
    notes = store.last_notes()
    for task in tasks:  # what a last run met, in words: it was only in the log (decision 510)
        if task.last_run_at is not None and (note := notes.get(task.name)):
            typer.echo(
                f"Last run of {task.name} ({_local(task.last_run_at, zone)}, {task.last_status}): {visible(note)}"
            )


@app.command()
def add(
    name: Annotated[str, typer.Argument(help="Task name: lowercase letters, digits, '-' or '_'.")],
    message: Annotated[str, typer.Option("--message", "-m", help="The request each run starts from.")],
    cron: Annotated[
        str | None, typer.Option("--cron", help="Crontab expression, e.g. '0 8 * * 1-5' (quote it).")
    ] = None,
    every: Annotated[str | None, typer.Option("--every", help="Interval instead of cron: 30m, 2h, 1d.")] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="Once, at a time instead: 'YYYY-MM-DD HH:MM' in scheduler.timezone (quote it)."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model id from engine.yaml for its runs.")] = None,
    inject_into: Annotated[
        str | None, typer.Option("--inject-into", help="Chat its answers go to: channel:chat_id.")
    ] = None,
    allow_tool: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-tool",
            metavar="TOOL",
            help="A tool held for approval (tools.approval) its runs may use without asking; repeatable.",
        ),
    ] = None,
    new_chat: Annotated[
        bool, typer.Option("--new-chat", help="Let --inject-into name a chat that has no messages yet.")
    ] = False,
) -> None:
    """Add a task that runs on a cron schedule (--cron), at an interval (--every), or once (--at)."""
    from klaw.llm.catalogue import ModelCatalogue
    from klaw.scheduling.names import typed_chat_target, validate_task_name
    from klaw.scheduling.schedules import TaskSchedule, day_share_warning, other_runs
    from klaw.scheduling.task_store import SCHEMA_VERSION, ScheduledTask, ScheduleStore
    from klaw.scheduling.zones import scheduler_zone

    home = home_from_env()
    config = load_or_exit(home).config
    version = file_of_this_klaw(home)
    if sum(given is not None for given in (cron, every, at)) != 1:
        fail("give exactly one of --cron EXPR, --every INTERVAL or --at 'YYYY-MM-DD HH:MM'")
    zone = scheduler_zone(config.scheduler.timezone)
    now = datetime.now(UTC)
    try:
        validate_task_name(name)
        if at is not None:
            schedule = TaskSchedule.at(at, zone, now)
        else:
            schedule = TaskSchedule.cron(cron) if cron is not None else TaskSchedule.every(every or "")
        target = typed_chat_target(inject_into) if inject_into is not None else None
        if target is not None and not new_chat:
            _stored_chat_or_exit(home, config, target)
        ModelCatalogue.from_config(config).check(model)
        allowed = tuple(dict.fromkeys(allow_tool or ()))
        not_held = [tool for tool in allowed if tool not in config.tools.approval]
        if not_held:
            fail(
                f"{not_held[0]!r} is not held for approval (tools.approval in engine.yaml lists"
                f" {', '.join(config.tools.approval) or 'nothing'}); --allow-tool names a held tool"
            )
        task = ScheduledTask(
            name,
            schedule,
            message,
            model,
            target,
            created_at=now,
            next_run_at=schedule.first_fire(now, zone),
            allowed_tools=allowed,
        )
        store = ScheduleStore(home.scheduler_db)
        reads = engine_schema(home)
        if reads is None or reads >= SCHEMA_VERSION or not home.scheduler_db.exists():
            store.create()
        elif version < (needs := 5 if schedule.kind == "at" else 2):  # never migrated under an older engine (542)
            kind = "a one-off task (--at)" if schedule.kind == "at" else "a task"
            fail(
                f"{older_engine(home)}: it reads scheduler.db at schema {version}, and {kind} needs schema {needs},"
                f" to which this klaw would move the file under it. Nothing was added: {RESTART}, then add the task",
                code=1,
            )
        store.add(task)
    except ValueError as exc:
        fail(str(exc))
    told = ask_engine(home, {"action": "changed"}, quiet=True)  # read now, not within a minute (decision 526)
    if told is None and (program := library_holder(home)) is not None:  # its engine runs it (decision 540)
        pickup = (
            f" {program} is running on this home: its engine reads the table within a minute and runs it when due"
            f" (`await agent.run_task({name!r})` runs it now there)."
        )
    elif told is None:
        pickup = " It runs while an engine runs on this home (`klaw serve`, `klaw engine`, `klaw chat`)."
    elif told is OLDER and schedule.kind == "at":  # it skips the row it cannot read (adversary33)
        pickup = (
            f" But {older_engine(home)} and cannot run it: it runs only once that engine is restarted with this klaw"
            " (`klaw serve` again) before its time."
        )
    elif told is OLDER:
        pickup = " The engine running on this home is older than this klaw; it reads the table within a minute."
    elif told is NOT_TOLD:
        pickup = " The engine running on this home did not answer now; it reads the table within a minute."
    else:
        pickup = " The engine running on this home has it."
    typer.echo(f"Added {name}: {schedule.describe(zone)}, next run {_local(task.next_run_at, zone)}.{pickup}")
    limit = config.scheduler.max_runs_per_day
    others, count = other_runs(((t.name, t.schedule) for t in store.list()), name, now, zone, cap=limit)
    runs = schedule.runs_per_day(now, zone, at_most=limit)
    if (heavy := day_share_warning(runs, limit, others=others, other_tasks=count)) is not None:
        stderr_console(highlight=False).print(f"warning: {heavy}")
    if (
        target is not None
        and target.channel == "telegram"
        and (why := config.channels.telegram.unserved(target.chat_id))
    ):
        stderr_console(highlight=False).print(
            f"warning: {why}; each run's reply waits in {target} until it does (engine.yaml's channels.telegram)"
        )


def _stored_chat_or_exit(home: KlawHome, config: EngineConfig, target: ChatRef) -> None:
    """Exit 2 unless `target` is a chat with messages: a mistyped id (or a telegram chat of a bot never
    set up) would otherwise be accepted and every run would start that chat, where nobody reads it."""
    from klaw.cli.stored_chats import chats_with_messages, require_chat_with_messages

    require_chat_with_messages(
        target,
        asyncio.run(chats_with_messages(home, config)),
        "Check the id, or add --new-chat to let the task's runs start that chat.",
    )


@app.command()
def remove(name: Annotated[str, typer.Argument(help="The task to remove.")]) -> None:
    """Remove a task. A run in progress finishes; the task's log under conversations/ is kept."""
    from klaw.scheduling.task_store import ScheduleStore

    home = home_from_env()
    missing = f"there is no task named {name!r}; `klaw schedule list` shows the tasks"
    file_of_this_klaw(home)  # a newer klaw's file: not a row of it deleted (decision 542)
    # Asked of the running engine: removed between two of its ticks, it never fires again (decision 526).
    said = ask_engine(home, {"action": "remove", "name": name})
    if said is not None and said is not OLDER:
        if not said.get("removed"):
            fail(missing, code=1)
        typer.echo(f"Removed {name}; the engine running on this home will not run it again.")
        return
    if not home.scheduler_db.exists() or not ScheduleStore(home.scheduler_db).remove(name):
        fail(missing, code=1)
    if said is OLDER:
        typer.echo(f"Removed {name}. The engine running on this home is older than this klaw: it reads the table"
                   " within a minute, and may start a run of it meanwhile.")  # fmt: skip
        return
    typer.echo(f"Removed {name}.")


def _done(task: ScheduledTask) -> bool:
    """A one-off task that ran (or was missed): it never runs again (decision 526)."""
    return task.schedule.kind == "at" and task.next_run_at is None


def _local(moment: datetime | None, zone: tzinfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


app.command()(run)  # `klaw schedule run NAME` (cli/schedule_engine.py, decision 526)
app.command()(runs)  # `klaw schedule runs NAME` (cli/schedule_runs.py), listed after the others
