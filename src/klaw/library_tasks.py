"""`Klaw.forget` and `Klaw.run_task`: what a person does with `/forget` and `klaw schedule run`, for a program
(decision 540). Before, a program could forget only by asking the slash command's text (`agent.ask(chat,
"/forget 99")`), whose refusal was an ordinary string ("Cannot forget: there is no exchange 99…"), and could not
run a scheduled task at all: `klaw schedule run` beside its non-listening `Klaw` was refused with the home held.
Both raise documented errors, importable from `klaw`: `ForgetError` and `TaskRunRefused`, each a ValueError.
A mixin of `Klaw` (library.py), kept here so each module stays one job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from klaw.errors import KlawError
from klaw.library_arguments import chat_of

if TYPE_CHECKING:
    from klaw.engine.runtime import Engine
    from klaw.store.records import ChatRef


class TaskRunRefused(KlawError, ValueError):
    """`Klaw.run_task` did not start the run: no such task, a run of it under way, the daily cap reached, no
    scheduler in this engine, the engine stopping; the message says which and what to do."""


@dataclass(frozen=True, slots=True)
class TaskRun:
    """How a task's run ended: `status` (`completed`, `silent`, `failed`, with `, denied tools` when a held tool
    was refused), its `answer`, whether it was `delivered` to the task's chat, and what it met (`note`)."""

    status: str
    answer: str
    delivered: bool
    note: str


class ForgetAndRunTask:
    """`forget` and `run_task` for `Klaw`, through its running `engine`."""

    @property
    def engine(self) -> Engine:  # Klaw's own property: the running engine, or EngineNotOpen
        raise NotImplementedError

    async def forget(self, chat: str | ChatRef, what: str = "last") -> str:
        """Erase from `chat` what `/forget WHAT` erases (`"last"`, `"exchange 99"`, `"segment 3"`, a
        saved memory's `"memory 12"`: docs/memory/forgetting.md), its turn under way stopped first, without the
        question a person is asked first about a segment of several messages (the program asked). Returns the
        sentence the person would read; raises `ForgetError` (a ValueError) naming what cannot be forgotten."""
        return await self.engine.commands.forget_for_program(chat_of(chat), what)

    async def run_task(self, name: str) -> TaskRun:
        """Run the scheduled task `name` now, once, as its schedule would (its chat gets the answer; its next
        run is unchanged), as `klaw schedule run NAME` does; returns once the run ended. Raises `TaskRunRefused`
        when it could not start (the message says why)."""
        from klaw.engine.schedule_query import run_said

        scheduler = self.engine.scheduler
        if scheduler is None:
            raise TaskRunRefused("this engine runs no scheduler (scheduler.enabled is false in its config)")
        try:
            outcome = await scheduler.run_now(str(name))
        except ValueError as exc:
            raise TaskRunRefused(str(exc)) from None
        said = run_said(outcome)
        return TaskRun(str(said["status"]), str(said["answer"]), bool(said["delivered"]), str(said["note"]))
