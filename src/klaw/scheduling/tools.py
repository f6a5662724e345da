"""`schedule_add`, `schedule_list`, `schedule_remove`, `subagent_spawn`: the agent's hands on the scheduler.

The tools are closures over a `TaskScheduler` (the engine's scheduler satisfies it), registered by
the engine once it has one; this package imports nothing from the engine. Mistakes (a bad cron
expression, a duplicate name, an unknown model) raise a `ToolRefusal` or klaw's own worded ValueError,
which the registry hands back to the model as it is, a readable error it can correct.

A task created from a chat reports to that chat unless told otherwise. A run of a task cannot start
other runs or change the tasks (it is not offered `subagent_spawn`, `schedule_add` or `schedule_remove`, and
the tool loop refuses a call to a tool not offered: decisions 258, 372), so a task cannot multiply itself
or remove the person's. A spawned run keeps its own history, apart from a
scheduled task of the same name (decision 217): what a chat tells it never reaches runs that may hold
pre-approved tools.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Annotated, Any, Protocol

from pydantic import Field

from klaw.scheduling.names import ADD_TOOL, SUBAGENT_CHANNEL, parse_chat_target
from klaw.scheduling.schedules import TaskSchedule, day_share_warning, other_runs
from klaw.scheduling.task_store import ScheduledTask
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolRefusal
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

NO_CHAT = "none"
_DEFAULT_MODEL = "Default: the subagent model"
_CRON = "minute hour day month weekday, e.g. '0 8 * * 1-5'"
_EVERY = "e.g. '30m', '2h', '1d'"
_AT = "Once: 'YYYY-MM-DD HH:MM'"
_INJECT_INTO = "Chat for answers, channel:chat_id; default this one; 'none': logged only"

TaskName = Annotated[
    str,
    Field(description="1-64 of a-z 0-9 - _"),
]


class TaskScheduler(Protocol):
    zone: tzinfo

    async def add_task(
        self,
        name: str,
        schedule: TaskSchedule,
        message: str,
        *,
        model: str | None,
        inject_into: ChatRef | None,
        allowed_tools: tuple[str, ...] = (),
    ) -> ScheduledTask: ...

    async def list_tasks(self) -> list[ScheduledTask]: ...

    async def remove_task(self, name: str) -> bool: ...

    def spawn(
        self,
        task_name: str,
        message: str,
        *,
        model: str | None,
        reply_to: ChatRef | None,
        tool_extras: Mapping[str, Any] | None = None,
    ) -> None: ...


def asks_for_more_than_its_chat(arguments: Mapping[str, Any], chat: ChatRef, *, targets: Collection[ChatRef]) -> bool:
    """Whether a schedule_add call made in `chat` would let a task run held tools without asking, or
    report into another chat: then the call itself is held for the person's approval
    (engine/approval.py), so an instruction injected into a turn can create neither a task that runs
    host_exec unasked nor one that writes into another chat every minute, outside message_send's caps
    (decision 379). A task reporting back where it was asked for, or nowhere, is the person's own
    conversation and is not held; nor is one into a chat off `targets`, which the tool refuses at once."""
    if arguments.get("allow_tools"):
        return True
    inject_into = arguments.get("inject_into")
    if inject_into is None:
        return False
    if not isinstance(inject_into, str):
        return True  # refused by validation; held all the same, to be safe
    if inject_into.strip().lower() == NO_CHAT:
        return False
    try:
        target = parse_chat_target(inject_into)
    except ValueError:
        return False  # refused by the tool itself, naming the allowed targets
    return target != chat and target in targets


def register_scheduler_tools(
    registry: ToolRegistry,
    scheduler: TaskScheduler,
    *,
    max_tasks: int = 50,
    max_runs_per_day: int = 1440,
    held_tools: Collection[str] = (),
    target_problem: Callable[[ChatRef], str | None] = lambda chat: None,
) -> None:
    """Offer the scheduling tools, bound to `scheduler`. The model may create at most `max_tasks` tasks
    firing at most `max_runs_per_day` times a day together (`scheduler.maxTasks`, `scheduler.maxRunsPerDay`):
    one reply once created 100 recurring tasks. `klaw schedule add`, the person's own, is not capped.
    `held_tools` (tools.approval) are the tools schedule_add's `allow_tools` may name. `target_problem`
    says why a chat other than the one asking may not get a task's answers (`message_send`'s rule,
    tools.messageTargets): a task's answer is a message to that chat, so it may go where `message_send`
    may, and no further."""

    adding = asyncio.Lock()

    async def check_limits(schedule: TaskSchedule, now: datetime) -> list[ScheduledTask]:
        """The tasks there are, once this one is within the limits."""
        tasks = await scheduler.list_tasks()
        if len(tasks) >= max_tasks:
            raise ToolRefusal(
                f"there are already {len(tasks)} scheduled tasks, the most allowed (scheduler.maxTasks = {max_tasks});"
                " remove one with schedule_remove first, or ask the person to raise scheduler.maxTasks"
            )
        runs = sum(t.schedule.runs_per_day(now, scheduler.zone, at_most=max_runs_per_day) for t in tasks)
        runs += schedule.runs_per_day(now, scheduler.zone, at_most=max_runs_per_day)
        if runs > max_runs_per_day:
            raise ToolRefusal(
                f"with this task the scheduled tasks would run more than {max_runs_per_day} times a day"
                f" (scheduler.maxRunsPerDay); choose a longer interval, remove a task, or ask the person to raise it"
            )
        return tasks

    async def add(
        context: ToolContext,
        name: str,
        message: str,
        cron: str | None,
        every: str | None,
        model: str | None,
        inject_into: str | None,
        allow_tools: list[str] | None,
        at: str | None = None,
    ) -> dict[str, Any]:
        if sum(given is not None for given in (cron, every, at)) != 1:
            raise ToolRefusal(
                "give exactly one of cron (a crontab expression), every (an interval such as 30m) or at (a time,"
                " once: 'YYYY-MM-DD HH:MM')"
            )
        clock = context.extras.get("clock")  # the engine's time when it gives it (tests move it)
        now = clock.now() if clock is not None else datetime.now(UTC)
        if at is not None:
            schedule = TaskSchedule.at(at, scheduler.zone, now)
        else:
            schedule = TaskSchedule.cron(cron) if cron is not None else TaskSchedule.every(every or "")
        target = _target(context, inject_into)
        if target is not None and target != context.chat and (problem := target_problem(target)) is not None:
            raise ToolRefusal(f"inject_into: {problem}")
        allowed = tuple(dict.fromkeys(allow_tools or ()))
        not_held = [tool for tool in allowed if tool not in held_tools]
        if not_held:
            raise ToolRefusal(
                f"allow_tools names {not_held[0]!r}, which needs no approval (held tools:"
                f" {', '.join(sorted(held_tools)) or 'none'}); leave it out"
            )
        async with adding:  # the calls of one round run concurrently: each must see the others' tasks
            before = await check_limits(schedule, now)
            task = await scheduler.add_task(
                name, schedule, message, model=model, inject_into=target, allowed_tools=allowed
            )
        described = _describe(task, scheduler.zone)
        runs = schedule.runs_per_day(task.created_at, scheduler.zone, at_most=max_runs_per_day)
        others = other_runs(
            ((t.name, t.schedule) for t in before), name, task.created_at, scheduler.zone, cap=max_runs_per_day
        )
        if (heavy := day_share_warning(runs, max_runs_per_day, others=others[0], other_tasks=others[1])) is not None:
            described["warning"] = f"{heavy} (tell the person)"
        return described

    async def schedule_add(
        context: ToolContext,
        name: TaskName,
        message: Annotated[str, Field(description="What each run is told")],
        cron: Annotated[str | None, Field(description=_CRON)] = None,
        every: Annotated[str | None, Field(description=_EVERY)] = None,
        at: Annotated[str | None, Field(description=_AT)] = None,
        model: Annotated[str | None, Field(description=_DEFAULT_MODEL)] = None,
        inject_into: Annotated[str | None, Field(description=_INJECT_INTO)] = None,
    ) -> dict[str, Any]:
        """Schedule a background agent's task by cron or at (scheduler's time zone) or every. A run sees
        earlier runs; its answer is sent unless exactly {"silent": true}."""
        return await add(context, name, message, cron, every, model, inject_into, None, at)

    # With tools held for approval, schedule_add may name those its runs use unasked (the call itself is
    # then held: asks_for_more_than_its_chat); without, the parameter is not offered (its schema costs tokens).
    async def schedule_add_allowing(
        context: ToolContext,
        name: TaskName,
        message: Annotated[str, Field(description="What each run is told")],
        cron: Annotated[str | None, Field(description=_CRON)] = None,
        every: Annotated[str | None, Field(description=_EVERY)] = None,
        at: Annotated[str | None, Field(description=_AT)] = None,
        model: Annotated[str | None, Field(description=_DEFAULT_MODEL)] = None,
        inject_into: Annotated[str | None, Field(description=_INJECT_INTO)] = None,
        allow_tools: Annotated[
            list[str] | None,
            Field(description="Held tools its runs may use unasked (asked of the person first)"),
        ] = None,
    ) -> dict[str, Any]:
        return await add(context, name, message, cron, every, model, inject_into, allow_tools, at)

    async def schedule_list() -> list[dict[str, Any]]:
        """List scheduled tasks: schedule, next and last run, model, target chat."""
        return [_describe(task, scheduler.zone) for task in await scheduler.list_tasks()]

    async def schedule_remove(name: str) -> str:
        """Remove a scheduled task; a run in progress finishes."""
        if not await scheduler.remove_task(name):
            raise ToolRefusal(f"there is no task named {name!r}; schedule_list shows the tasks")
        return f"Removed the task {name!r}."

    if held_tools:
        registry.register(schedule_add_allowing, name=ADD_TOOL, description=inspect.getdoc(schedule_add))
    else:
        registry.register(schedule_add)
    for tool in (schedule_list, schedule_remove):
        registry.register(tool)


def register_subagent_tools(registry: ToolRegistry, scheduler: TaskScheduler) -> None:
    """Offer `subagent_spawn` (the group `subagents`), bound to `scheduler`."""

    async def subagent_spawn(
        context: ToolContext,
        task_name: TaskName,
        message: Annotated[str, Field(description="Complete instruction")],
        model: Annotated[str | None, Field(description=_DEFAULT_MODEL)] = None,
    ) -> str:
        """Start a background agent now, not waited for; it sees earlier spawned runs of task_name; its answer
        comes here unless exactly {"silent": true}."""
        # The run's tools share the spawning turn's budgets (message_send's sends a turn: decision 389)
        scheduler.spawn(task_name, message, model=model, reply_to=context.chat, tool_extras=context.extras)
        return f"Started a run of {task_name!r}; its answer will arrive in this chat when it is done."

    registry.register(subagent_spawn)


def _target(context: ToolContext, inject_into: str | None) -> ChatRef | None:
    if inject_into is None:
        # From a chat: report there. From a task's run: nowhere, unless told.
        return None if context.chat.channel == SUBAGENT_CHANNEL else context.chat
    if inject_into.strip().lower() == NO_CHAT:
        return None
    return parse_chat_target(inject_into)


def _describe(task: ScheduledTask, zone: tzinfo) -> dict[str, Any]:
    return {
        "name": task.name,
        "schedule": task.schedule.describe(zone)
        + (" (done)" if task.schedule.kind == "at" and not task.next_run_at else ""),
        "message": task.message,
        "model": task.model or "(subagent default)",
        "reports_to": str(task.inject_into) if task.inject_into else "(only logged)",
        "next_run": _local(task.next_run_at, zone),
        "last_run": _local(task.last_run_at, zone),
        "last_status": task.last_status,
        **({"allowed_tools": list(task.allowed_tools)} if task.allowed_tools else {}),
    }


def _local(moment: datetime | None, zone: tzinfo) -> str | None:
    return moment.astimezone(zone).isoformat(timespec="seconds") if moment else None
