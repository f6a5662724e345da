"""A task that would report into another chat is asked of the person first (decision 379).

adversary17: one prompt-injected turn called `schedule_add(every="1m", inject_into=<another chat>)`, not held
for approval, and the other chat got an answer every minute (1,440 a day, past every `message_send` cap).
Driven through the engine's socket as test_tool_approval.py's stand does.
"""

from __future__ import annotations

from pathlib import Path

from tests.engine.test_tool_approval import stand

TARGETS = ["web:main", "console:me"]


async def test_a_task_reporting_into_another_chat_waits_for_the_person_and_a_deny_creates_none(
    tmp_path: Path,
) -> None:
    async with stand(messageTargets=TARGETS) as s:
        arguments = {"name": "ping", "every": "1m", "message": "say hi", "inject_into": "console:me"}
        s.server.reply_tool_calls([("schedule_add", arguments)])
        s.server.reply_text("Not scheduled.")
        await s.ask("summarise this page")
        request_id, question = await s.question()
        assert "The agent wants to run schedule_add:" in question.text
        assert "inject_into: console:me" in question.text
        assert "```\nIf you approve, the task 'ping' will post its answers into console:me every 1m.\n" in question.text
        await s.send(f"/deny {request_id}")
        assert (await s.outbound()).text == "Denied: schedule_add will not run."
        assert (await s.outbound()).text == "Not scheduled."
        scheduler = s.engine.scheduler
        assert scheduler is not None
        assert await scheduler.list_tasks() == []


async def test_a_task_reporting_back_into_its_own_chat_is_not_asked(tmp_path: Path) -> None:
    async with stand(messageTargets=TARGETS) as s:
        for name, into in (("here", "web:main"), ("unsaid", None), ("quiet", "none")):
            arguments = {"name": name, "every": "1h", "message": "check the weather"}
            if into is not None:
                arguments["inject_into"] = into
            s.server.reply_tool_calls([("schedule_add", arguments)])
            s.server.reply_text(f"Scheduled {name}.")
            await s.ask(f"check the weather hourly ({name})")
            assert (await s.outbound()).text == f"Scheduled {name}."  # no question came first
        scheduler = s.engine.scheduler
        assert scheduler is not None
        tasks = {task.name: task.inject_into for task in await scheduler.list_tasks()}
        assert {name: str(chat) if chat else None for name, chat in tasks.items()} == {
            "here": "web:main",
            "unsaid": "web:main",
            "quiet": None,
        }
