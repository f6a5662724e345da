"""`klaw schedule` beside a running engine: the socket's `schedule` query (engine/schedule_query.py), and
`klaw schedule run NAME` (decision 526).

`remove` is asked of the engine, which removes the task between two of its ticks: it never fires again (the
file edited behind its back let a `--every 1m` task fire once more within the minute the engine took to read
it). `add` writes the file, then tells the engine to read it now. `run` runs the task through the engine, or,
when none runs, in an engine started in this process for the run, and prints how it ended and its answer.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Annotated, Any

import typer

from klaw.cli.context import HOME_HELD_EXIT, fail, home_from_env, load_or_exit
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from klaw.home import KlawHome

QUICK_SECONDS = 15.0  # a removal, a poke: a few reads
RUN_SECONDS = 3600.0  # a run: its model calls and tools, bounded by the engine's own deadlines
RUN_COMMAND = "klaw schedule run"  # what the home's lock says, with the task's name, during a run here
_ids = itertools.count(1)


NOT_TOLD: dict[str, Any] = {"not_told": True}
"""`ask_engine(quiet=True)`'s answer when an engine runs but did not answer (busy, refusing): what was to be
told is left to its next look."""
OLDER: dict[str, Any] = {"older": True}
"""`ask_engine`'s answer when the engine running is older than this klaw: it does not know the `schedule`
query, so it reads scheduler.db at schema 4 at most and knows no one-off task (decision 542)."""
RESTART = "stop it, then start it with this klaw (`klaw serve` again)"


def older_engine(home: KlawHome) -> str:
    """The words for an engine older than this klaw, running on `home` (decision 542)."""
    return f"the engine running on {home.root} is older than this klaw (it does not know the `schedule` query)"


def file_of_this_klaw(home: KlawHome) -> int:
    """scheduler.db's schema version (0: none yet); exit 1 in words when a newer klaw made it, before any command
    reads or changes it (decision 542: `remove` deleted a row of a file it could not read)."""
    import sqlite3

    from klaw.scheduling.task_store import SCHEMA_VERSION, SchedulerFileTooNew, ScheduleStore

    try:
        version = ScheduleStore(home.scheduler_db).version()
    except sqlite3.Error:
        return 0  # unreadable: the command's own read says why (edge_failures.py)
    if version > SCHEMA_VERSION:
        fail(str(SchedulerFileTooNew(home.scheduler_db, version)), code=1)
    return version


def ask_engine(
    home: KlawHome, params: dict[str, Any], timeout_seconds: float = QUICK_SECONDS, *, quiet: bool = False
) -> dict[str, Any] | None:
    """The engine's answer to one `schedule` query; None when no engine answers; `OLDER` from one too old to know
    the query; a refusal exits 1 in its words, or, `quiet` (a note after the work is done: `add`'s), is
    `NOT_TOLD`. A run's connection closed before its answer is the engine stopping during the run (542)."""
    from klaw.engine.frames import QueryFrame
    from klaw.engine.one_query import EngineRefused, ask
    from klaw.engine_presence import engine_answers

    async def query() -> tuple[str | None, Any] | None:
        if not await engine_answers(home.socket_path):
            return None
        frame = await ask(
            home.socket_path, QueryFrame(id=f"schedule-{next(_ids)}", query="schedule", params=params), timeout_seconds
        )
        return frame.error, frame.data

    try:
        answered = asyncio.run(query())
    except EngineRefused as exc:
        if quiet:
            return NOT_TOLD
        fail(f"the engine running on {home.root} refused the connection: {exc}", code=1)
    except (OSError, EOFError, TimeoutError) as exc:
        if quiet:
            return NOT_TOLD
        if params.get("action") == "run":
            _run_lost(home, str(params.get("name", "")), exc)
        fail(f"an engine is running on {home.root} but did not answer on {home.socket_path} ({type(exc).__name__});"
             " try again", code=1)  # fmt: skip
    if answered is None:
        return None
    error, data = answered
    if error is not None:
        if error.startswith("unknown query"):  # an engine older than this command
            return OLDER
        if quiet:
            return NOT_TOLD
        fail(error, code=1)
    return data if isinstance(data, dict) else {}


def engine_schema(home: KlawHome) -> int | None:
    """The scheduler.db schema the engine running on `home` reads; None when none runs. One that does not know
    the query reads 4 at most; one that does not know the `schema` action (or did not answer) this klaw's."""
    from klaw.scheduling.task_store import SCHEMA_VERSION

    said = ask_engine(home, {"action": "schema"}, quiet=True)
    if said is None:
        return None
    if said is OLDER:
        return 4
    schema = said.get("schema")
    return schema if isinstance(schema, int) else SCHEMA_VERSION


def _run_lost(home: KlawHome, name: str, exc: BaseException) -> None:
    """A run asked of the engine that did not end in an answer: the engine stopped during it (its connection
    closed), or it is still going after `RUN_SECONDS`. Not "try again": the run did start (adversary33)."""
    if isinstance(exc, (EOFError, ConnectionResetError, BrokenPipeError)):
        fail(
            f"the engine running on {home.root} stopped during the run of {name}, so the run was interrupted;"
            f" `klaw schedule runs {name}` shows what it did, and the engine's next start notes it was cut off",
            code=1,
        )
    if isinstance(exc, TimeoutError):
        fail(
            f"the run of {name} did not end within {RUN_SECONDS / 3600:.0f} hour; it goes on in the engine running"
            f" on {home.root}: `klaw schedule runs {name}` shows it once done",
            code=1,
        )


def run(name: Annotated[str, typer.Argument(help="The task to run now.")]) -> None:
    """Run a task now, once, as its schedule would (its chat gets the answer); its next run is unchanged."""
    from klaw.home_lock import running_command

    home = home_from_env()
    loaded = load_or_exit(home)
    file_of_this_klaw(home)
    _no_run_here_under_way(home, name)
    said = ask_engine(home, {"action": "run", "name": name}, RUN_SECONDS)
    if said is OLDER:
        fail(f"{older_engine(home)}, so it cannot run a task now: {RESTART}, then run {name} again", code=1)
    where = "through the engine running on this home"
    if said is None:
        _refuse_beside_a_program(home, name)
        with running_command(f"{RUN_COMMAND} {name}"):  # the home's lock names the task (decision 542)
            said = asyncio.run(_run_here(home, loaded, name))
        where = "in this process (no engine runs on this home)"
    status = str(said.get("status", ""))
    typer.echo(f"Ran {name} {where}: {status}.")
    if said.get("note"):
        typer.echo(f"It met: {visible(str(said['note']))}")
    if said.get("delivered"):
        typer.echo("Its answer went to the task's chat:")
    elif status.startswith("silent"):
        typer.echo("It chose to stay silent; its answer is only in its log:")
    typer.echo("\n".join("  " + line for line in visible(str(said.get("answer", ""))).splitlines()))
    if status.startswith("failed"):
        raise typer.Exit(1)


def library_holder(home: KlawHome) -> str | None:
    """Who holds the home when it is a program's library `Klaw` answering no socket ('a program using klaw's
    library API (pid 123, program my_bot.py)'), else None: its own engine runs the tasks (decision 540)."""
    from klaw.engine_presence import home_holder
    from klaw.home_lock import ENGINE_ROLE, LIBRARY

    holder = asyncio.run(home_holder(home))
    if holder is None or holder.command != LIBRARY or holder.role not in ("", ENGINE_ROLE):
        return None
    return holder.describe()


def _refuse_beside_a_program(home: KlawHome, name: str) -> None:
    """Exit 75 (the home is held) with what works beside a program's `Klaw`: it said only "end that program
    first", though the program can run the task itself or let this command ask it (newcomer24, decision 540)."""
    from klaw.cli.context import HOME_HELD_EXIT

    program = library_holder(home)
    if program is not None:
        fail(
            f"{program} is running on {home.root}, and its engine runs this home's tasks: run it from there"
            f" (`await agent.run_task({name!r})`), or open its Klaw with listen=True so `klaw schedule run` asks"
            " it; or end that program, or close its Klaw, first",
            code=HOME_HELD_EXIT,
        )


def _no_run_here_under_way(home: KlawHome, name: str) -> None:
    """Exit 75 in words when another `klaw schedule run` holds the home with an engine of its own, which stops
    once its run ends (a run asked of it would be cut off then): it said "stop it first (kill N)" (542)."""
    from klaw.home_lock import holder_of

    holder = holder_of(home.root)
    if holder is not None and holder.command.startswith(f"{RUN_COMMAND} "):
        task = holder.command.removeprefix(f"{RUN_COMMAND} ")
        fail(
            f"a run is under way on this home: {holder.describe()} is running task {task} in an engine of its own,"
            f" which stops once that run ends; wait for it (it prints the answer), then run {name} again;"
            f" `klaw schedule runs {task}` shows its runs",
            HOME_HELD_EXIT,
        )


async def _run_here(home: KlawHome, loaded: Any, name: str) -> dict[str, Any]:
    """The run in an engine started here for it (tasks due meanwhile fire in it, as in any engine), then stopped."""
    from klaw.cli.context import start_engine_or_exit
    from klaw.engine.schedule_query import run_said

    async def held() -> bool:  # lost the start to another `klaw schedule run`: say so, not "kill N"
        _no_run_here_under_way(home, name)
        return False

    engine = await start_engine_or_exit(home, loaded, wait_if_held=held)
    try:
        assert engine.scheduler is not None
        try:
            outcome = await engine.scheduler.run_now(name)
        except ValueError as exc:
            fail(str(exc), code=1)
    finally:
        await engine.shutdown()
    return run_said(outcome)
