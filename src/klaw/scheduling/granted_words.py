"""What approving a `schedule_add` grants, in plain words for its approval question (decision 525, item 3).

newcomer23: the question showed only the raw arguments (`allow_tools: ["file_write"]`), and what a yes
meant (a task running file_write every hour, nobody asked again) was left for the person to work out.
The sentence is put under the arguments by the approval gate; a call whose schedule does not parse says
so, since the tool refuses it anyway. Imports nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from klaw.scheduling.schedules import InvalidSchedule, TaskSchedule
from klaw.scheduling.tools import NO_CHAT
from klaw.text_preview import preview

_NAME_CHARS = 80  # the arguments above show them whole; the sentence only names them


def schedule_add_grants(arguments: Mapping[str, Any]) -> str | None:
    """`If you approve, the task 'tidy' will run file_write every 1h without asking you.` (`once at …` for a
    one-off task; and where it reports, when that is another chat), or None when the call grants nothing beyond
    its own chat."""
    given = arguments.get("allow_tools")
    allowed = [preview(t, _NAME_CHARS) for t in given if isinstance(t, str)] if isinstance(given, list) else []
    into = arguments.get("inject_into")
    into = preview(into, _NAME_CHARS) if isinstance(into, str) and into.strip().lower() != NO_CHAT else None
    if not allowed and into is None:
        return None
    name = arguments.get("name")
    task = f"the task {preview(name, _NAME_CHARS)!r}" if isinstance(name, str) and name.strip() else "the task"
    when = _when(arguments)
    said: list[str] = []
    if allowed:
        tools = allowed[0] if len(allowed) == 1 else ", ".join(allowed[:-1]) + f" and {allowed[-1]}"
        said.append(f"will run {tools} {when} without asking you")
    if into is not None:
        said.append(f"will post its answers into {into}" + ("" if allowed else f" {when}"))
    return f"If you approve, {task} " + ", and ".join(said) + "."


def _when(arguments: Mapping[str, Any]) -> str:
    cron, every, at = arguments.get("cron"), arguments.get("every"), arguments.get("at")
    try:
        if isinstance(every, str) and cron is None and at is None:
            return TaskSchedule.every(every).describe()
        if isinstance(cron, str) and every is None and at is None:
            return f"on the schedule {TaskSchedule.cron(cron).describe()} (the scheduler's time zone)"
        if isinstance(at, str) and cron is None and every is None:  # a one-off task (decision 526, 528)
            return _once(at)
    except (InvalidSchedule, ValueError):
        pass
    return "on a schedule the tool will refuse as it is written"


def _once(text: str) -> str:
    """`once at 2030-12-01 17:00 (the scheduler's time zone)`, read as TaskSchedule.at reads it; ValueError
    when it does not read (the tool refuses it). Whether it has passed is the tool's to say: no clock here."""
    moment = datetime.fromisoformat(" ".join(text.split()))
    if moment.tzinfo is None:
        return f"once at {moment:%Y-%m-%d %H:%M} (the scheduler's time zone)"
    return f"once at {moment.isoformat(sep=' ', timespec='minutes')}"
