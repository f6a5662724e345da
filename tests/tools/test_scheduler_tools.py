"""The scheduling tools against a stub scheduler: arguments, defaults, and errors the model can read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import pytest

from klaw.llm.messages import ToolCall
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduledTask
from klaw.scheduling.tools import register_scheduler_tools, register_subagent_tools
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

CHAT = ChatRef("telegram", "42")
NOW = datetime(2026, 1, 1, 9, tzinfo=UTC)


@dataclass
class StubScheduler:
    zone: tzinfo = UTC
    tasks: dict[str, ScheduledTask] = field(default_factory=dict)
    spawned: list[tuple[str, str, str | None, ChatRef | None]] = field(default_factory=list)

    async def add_task(
        self,
        name: str,
        schedule: TaskSchedule,
        message: str,
        *,
        model: str | None,
        inject_into: ChatRef | None,
        allowed_tools: tuple[str, ...] = (),
    ) -> ScheduledTask:
        task = ScheduledTask(name, schedule, message, model, inject_into, created_at=NOW, allowed_tools=allowed_tools)
        self.tasks[name] = replace(task, next_run_at=schedule.first_fire(NOW, UTC))
        return self.tasks[name]

    async def list_tasks(self) -> list[ScheduledTask]:
        return list(self.tasks.values())

    async def remove_task(self, name: str) -> bool:
        return self.tasks.pop(name, None) is not None

    def spawn(
        self,
        task_name: str,
        message: str,
        *,
        model: str | None,
        reply_to: ChatRef | None,
        tool_extras: Mapping[str, Any] | None = None,
    ) -> None:
        self.spawned.append((task_name, message, model, reply_to))


@pytest.fixture
def stub() -> StubScheduler:
    return StubScheduler()


async def call(stub: StubScheduler, tool: str, chat: ChatRef = CHAT, /, **arguments: Any) -> ToolResult:
    registry = ToolRegistry()
    register_scheduler_tools(registry, stub)
    register_subagent_tools(registry, stub)
    context = ToolContext(chat=chat, workspace=Path("/nonexistent"))
    return await registry.execute(ToolCall(id="c1", name=tool, arguments=json.dumps(arguments)), context)


def test_the_tools_and_their_schemas() -> None:
    registry = ToolRegistry()
    register_scheduler_tools(registry, StubScheduler())
    register_subagent_tools(registry, StubScheduler())
    assert registry.names == ("schedule_add", "schedule_list", "schedule_remove", "subagent_spawn")
    add = next(spec for spec in registry.specs() if spec.name == "schedule_add")
    assert add.parameters["required"] == ["name", "message"]
    assert set(add.parameters["properties"]) == {"name", "message", "cron", "every", "at", "model", "inject_into"}


async def test_schedule_add_reports_to_the_calling_chat_by_default(stub: StubScheduler) -> None:
    result = await call(stub, "schedule_add", name="news", message="What is new?", every="2h")
    assert not result.is_error, result.content
    shown = json.loads(result.content)
    assert shown["schedule"] == "every 2h" and shown["reports_to"] == "telegram:42"
    assert (
        shown["next_run"] == "2026-01-01T11:00:00+00:00"
    )  # to the second: an `every` task keeps its start's seconds (newcomer14)
    assert stub.tasks["news"].inject_into == CHAT


async def test_schedule_add_elsewhere_or_nowhere(stub: StubScheduler) -> None:
    await call(stub, "schedule_add", name="a", message="x", cron="0 8 * * *", inject_into="web:u1")
    await call(stub, "schedule_add", name="b", message="x", cron="0 8 * * *", inject_into="none")
    assert stub.tasks["a"].inject_into == ChatRef("web", "u1")
    assert stub.tasks["b"].inject_into is None


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"cron": "0 8 * *"}, "invalid cron expression '0 8 * *'"),
        ({"cron": "0 8 * * 9"}, "the day-of-week (field 5 of 5) is '9'"),
        ({"every": "soon"}, "invalid interval 'soon'"),
        ({}, "give exactly one of cron"),
        ({"cron": "* * * * *", "every": "1h"}, "give exactly one of cron"),
        ({"every": "1h", "inject_into": "scheduler:x"}, "cannot reply into it"),
    ],
)
async def test_schedule_add_errors_are_readable(stub: StubScheduler, arguments: dict[str, Any], error: str) -> None:
    result = await call(stub, "schedule_add", name="x", message="m", **arguments)
    assert result.is_error and error in result.content
    assert stub.tasks == {}


async def test_schedule_list_and_remove(stub: StubScheduler) -> None:
    await call(stub, "schedule_add", name="news", message="x", every="1h")
    listed = json.loads((await call(stub, "schedule_list")).content)
    assert [t["name"] for t in listed] == ["news"]
    assert (await call(stub, "schedule_remove", name="news")).content == "Removed the task 'news'."
    missing = await call(stub, "schedule_remove", name="news")
    assert missing.is_error and "there is no task named 'news'" in missing.content


async def test_subagent_spawn_answers_back_to_the_calling_chat(stub: StubScheduler) -> None:
    result = await call(stub, "subagent_spawn", task_name="research", message="find sources")
    assert not result.is_error and "Started a run of 'research'" in result.content
    assert stub.spawned == [("research", "find sources", None, CHAT)]


async def test_a_tasks_new_tasks_report_nowhere_by_default(stub: StubScheduler) -> None:
    # A run is not offered subagent_spawn at all: tests/test_library_subagent_tools.py (decision 258).
    run_chat = ChatRef("scheduler", "digest")
    await call(stub, "schedule_add", run_chat, name="child", message="x", every="1h")
    assert stub.tasks["child"].inject_into is None
