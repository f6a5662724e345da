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

from klaw.cli.context import fail, home_from_env, load_or_exit
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from klaw.home import KlawHome

QUICK_SECONDS = 15.0  # a removal, a poke: a few reads
RUN_SECONDS = 3600.0  # a run: its model calls and tools, bounded by the engine's own deadlines
_ids = itertools.count(1)


NOT_TOLD: dict[str, Any] = {"not_told": True}
"""`ask_engine(quiet=True)`'s answer when an engine runs but did not answer (busy, refusing): what was to be
told is left to its next look."""


def ask_engine(
    home: KlawHome, params: dict[str, Any], timeout_seconds: float = QUICK_SECONDS, *, quiet: bool = False
) -> dict[str, Any] | None:
    """The engine's answer to one `schedule` query; None when no engine answers (or one too old to know the query:
    the command does it itself); a refusal exits 1 in its words, or, `quiet` (a note after the work is done:
    `add`'s), is `NOT_TOLD`."""
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
        fail(f"an engine is running on {home.root} but did not answer on {home.socket_path} ({type(exc).__name__});"
             " try again", code=1)  # fmt: skip
    if answered is None:
        return None
    error, data = answered
    if error is not None:
        if error.startswith("unknown query"):  # an engine older than this command
            return None
        if quiet:
            return NOT_TOLD
        fail(error, code=1)
    return data if isinstance(data, dict) else {}


def run(name: Annotated[str, typer.Argument(help="The task to run now.")]) -> None:
    """Run a task now, once, as its schedule would (its chat gets the answer); its next run is unchanged."""
    home = home_from_env()
    loaded = load_or_exit(home)
    said = ask_engine(home, {"action": "run", "name": name}, RUN_SECONDS)
    where = "through the engine running on this home"
    if said is None:
        _refuse_beside_a_program(home, name)
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


async def _run_here(home: KlawHome, loaded: Any, name: str) -> dict[str, Any]:
    """The run in an engine started here for it (tasks due meanwhile fire in it, as in any engine), then stopped."""
    from klaw.cli.context import start_engine_or_exit
    from klaw.engine.schedule_query import run_said

    engine = await start_engine_or_exit(home, loaded)
    try:
        assert engine.scheduler is not None
        try:
            outcome = await engine.scheduler.run_now(name)
        except ValueError as exc:
            fail(str(exc), code=1)
    finally:
        await engine.shutdown()
    return run_said(outcome)
