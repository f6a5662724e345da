"""Task runs a crash cut off, told at the next start (docs/decisions/307-a-cut-off-task-run-is-told-not-rerun.md).

A run is noted in `scheduler.db` (`runs`) when it starts and the note goes when it ends; a note left
at a start is a run `kill -9` (or a power loss) cut off. Before, such a run vanished without a word:
its chat never heard of it, `klaw schedule list` showed the run before it, and its log was closed as
interrupted only when the task next ran. Now, when the scheduler starts, each one is:
- closed in the task's log as interrupted (its history stays a sequence of complete runs),
- recorded for a scheduled task as its last run, `interrupted`, at the time it started (`klaw schedule list`),
- told in its chat, if it has one, by a message naming the task and when the run started, logged and
  kept for delivery like a task's answer (decision 101), so it reaches a gateway that connects later.
- a call of it whose approval question was open at the kill (a spawned subagent asks its chat's person)
  written in its log as never approved and named in that message, as a chat's turn does (decision 535).
It is not run again: its tools may have acted (a message sent, a command run), the reasoning of
decision 299; the person, told, decides. A run whose log shows it finished (klaw stopped after its
answer, before its note went) is not cut off: its answer, if its chat had not got it yet, is sent there
now, under an id drawn from the run's final record so that it is never sent twice (decision 324). A run
that ended with its answer still waiting for its chat (a turn there held it: decision 432) has the answer
kept with its note: it is sent the same way. These messages go into their chats in the order the runs
ended, through the runner's queue for each chat, so a turn holding a chat (an approval asked) does not
hold the scheduler's first firings; the note goes once its message is in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import tzinfo

from klaw.engine.interrupted_exchanges import never_approved_results
from klaw.engine.open_questions import OpenQuestions
from klaw.engine.run_answers import WaitingAnswer
from klaw.engine.silent import is_silent
from klaw.engine.subagents import ANSWERS, INTERRUPTED_TEXT, SubagentRunner, answer_id, run_answer_metadata
from klaw.scheduling.names import task_chat
from klaw.scheduling.task_store import RunUnderWay, ScheduleStore

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted"


def cut_off_notice(run: RunUnderWay, zone: tzinfo, never_approved: Sequence[str] = ()) -> str:
    """What the run's chat is told: which run, when it started, that it was not run again and why, and the
    calls whose approval question was still open (never approved, not run: decision 535)."""
    when = run.started_at.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
    what = f"The run of task '{run.task}'" if run.origin == "schedule" else f"The subagent run '{run.task}'"
    then = (
        "It runs next as scheduled (klaw schedule list shows when), or ask me to run it now."
        if run.origin == "schedule"
        else "Ask again if you still want it."
    )
    unasked = ""
    if never_approved:
        tools = ", ".join(dict.fromkeys(never_approved))
        unasked = (
            f" Its question asking you to approve {tools} was still open when klaw stopped: not run, as it was"
            " never approved."
        )
    return (
        f"{what} that started at {when} was cut off: klaw stopped (a restart or a crash) before it finished,"
        f" so it has no answer.{unasked} It was not run again, since its tools may already have acted. {then}"
    )


async def tell_cut_off(
    store: ScheduleStore,
    runner: SubagentRunner,
    runs: Sequence[RunUnderWay],
    zone: tzinfo,
    noted: OpenQuestions | None = None,
) -> int:
    """Tell each of `runs` (the notes left at start); returns how many were cut off. A failure to tell one
    (a full disk) is logged and leaves its note, so the next start tells it. `noted`: the approval questions a
    kill left open (open_questions.py), a cut-off run's told as never approved, as a chat's are (decision 535)."""
    told = 0
    for run in runs:
        try:
            told += await _tell(store, runner, run, zone, noted)
        except Exception as exc:
            log.error("the cut-off run of task %s could not be told: %s", run.task, type(exc).__name__, exc_info=True)
    return told


async def _tell(
    store: ScheduleStore, runner: SubagentRunner, run: RunUnderWay, zone: tzinfo, noted: OpenQuestions | None
) -> bool:
    if run.answer is not None:  # the run ended, its status recorded; its answer waited for its chat (decision 432)
        if run.inject_into is None:  # its chat cannot be read (edited by hand): the answer stays in the log
            await asyncio.to_thread(store.run_ended, run)
        else:
            metadata = run_answer_metadata(run.task, run.origin)
            answer = WaitingAnswer(run.inject_into, run.answer.text, metadata, (run.answer.id, run.answer.at))
            runner.deliver_later(answer, run)
        return False
    final = await runner.history.finished_since(run.log_name, run.started_at)
    if final is not None:  # klaw stopped after the run's answer: it goes to its chat once (decision 324)
        status = (final.metadata or {}).get("run_status")
        if run.origin == "schedule" and isinstance(status, str):
            shown = "silent" if status in ANSWERS and is_silent(final.content) else status
            await asyncio.to_thread(store.record_run, run.task, final.created_at, shown)
        if run.inject_into is not None and status in ANSWERS and not is_silent(final.content):
            metadata = run_answer_metadata(run.task, run.origin)
            once = (answer_id(final), final.created_at)
            runner.deliver_later(WaitingAnswer(run.inject_into, final.content, metadata, once), run)
        else:
            await asyncio.to_thread(store.run_ended, run)
        return False
    if run.origin == "schedule":
        await asyncio.to_thread(store.record_run, run.task, run.started_at, INTERRUPTED)
    never_approved = await _never_approved(runner, run, noted)
    if await runner.history.has_unfinished_run(run.log_name):
        await runner.append(runner.final(task_chat(run.log_name), INTERRUPTED_TEXT, INTERRUPTED))
    if run.inject_into is not None:
        metadata = {"source": "task", "task": run.task, "origin": run.origin, "run_status": INTERRUPTED}
        notice = cut_off_notice(run, zone, never_approved)
        runner.deliver_later(WaitingAnswer(run.inject_into, notice, metadata, None), run)
    else:
        await asyncio.to_thread(store.run_ended, run)
    log.warning("the run of task %s started at %s was cut off when klaw stopped; told, not run again", run.task,
                run.started_at.isoformat(timespec="seconds"))  # fmt: skip
    return True


async def _never_approved(runner: SubagentRunner, run: RunUnderWay, noted: OpenQuestions | None) -> list[str]:
    """The run's calls whose question was open at the kill (a spawned subagent asks its chat's person, decision
    525), written into its log as never approved before the run is closed (the model of a later run of the name
    reads them so, not as "may or may not have taken effect"), their note cleared; their tools' names."""
    chat = task_chat(run.log_name)
    ids = await noted.take_run(chat) if noted is not None else frozenset[str]()
    if not ids:
        return []
    results = never_approved_results(chat, await runner.history.unfinished(run.log_name), ids, runner.now())
    for result in results:
        await runner.append(result)
    return [str((result.metadata or {}).get("name")) for result in results]
