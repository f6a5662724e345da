"""The socket's `schedule` query: `klaw schedule remove|add|run` beside a running engine (decision 526).

`klaw schedule` edits scheduler.db itself, and the engine re-read it within a minute: a task removed with
`--every 1m` could fire once more, one added waited, and nothing could run a task now. Now the command asks
the engine first: {action: "remove", name} removes it between two ticks, so it never fires again;
{action: "changed"} has the table read at once; {action: "run", name} runs the task now and answers once the
run ended, with its status, what it met and its answer; {action: "schema"} is the scheduler.db version it reads
(decision 542: a command of a newer klaw does not migrate the file under it). A refusal is a QueryError in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from klaw.engine.frame_dispatch import QueryError
from klaw.engine.scheduler_loop import DENIED_STATUS, Scheduler, denied_note
from klaw.engine.subagents import RunOutcome
from klaw.scheduling.task_store import SCHEMA_VERSION

ACTIONS = ("remove", "changed", "run", "schema")


async def schedule_answer(scheduler: Scheduler, params: Mapping[str, Any]) -> dict[str, Any]:
    """What the query's `action` did: {removed}, {}, or a run's {status, answer, delivered, note}."""
    action = params.get("action")
    name = str(params.get("name", ""))
    if action == "changed":
        scheduler.changed()
        return {"schema": SCHEMA_VERSION}
    if action == "schema":  # the scheduler.db schema this engine reads: a newer command migrates no further (542)
        return {"schema": SCHEMA_VERSION}
    if action == "remove":
        return {"removed": await scheduler.remove_task(name)}
    if action == "run":
        try:
            outcome = await scheduler.run_now(name)
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        return run_said(outcome)
    raise QueryError(f"unknown schedule action {action!r}; known: {', '.join(ACTIONS)}")


def run_said(outcome: RunOutcome) -> dict[str, Any]:
    """A run's outcome as `klaw schedule run` prints it, through the socket or in its own process."""
    status = outcome.status.value + (f", {DENIED_STATUS}" if outcome.denied else "")
    notes = [
        note
        for note in (outcome.reason, denied_note(outcome.denied, outcome.task_name) if outcome.denied else "")
        if note
    ]
    return {"status": status, "answer": outcome.answer, "delivered": outcome.delivered, "note": "; ".join(notes)}
