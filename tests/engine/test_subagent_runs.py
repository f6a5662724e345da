"""Subagent runs through the whole engine: the task's JSONL (and nothing else), models, failures,
spawning from a conversation, priority behind interactive turns, shutdown. Real HTTP, real SQLite."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from klaw.engine.clock import settle
from klaw.engine.subagents import INTERRUPTED_TEXT, RunStatus, SubagentRequest, SubagentRunner, TaskBusy
from klaw.memory.conversation_log import ConversationLog
from klaw.scheduling.names import task_chat
from klaw.scheduling.schedules import TaskSchedule
from klaw.store.log_format import decode_record, encode_record
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from tests.engine.harness import CHAT, Harness, running_engine

TASK = "digest"
OTHER = ChatRef("console", "other")


def runner(h: Harness) -> SubagentRunner:
    assert h.engine.scheduler is not None
    return h.engine.scheduler.runner


def task_log(h: Harness, task: str = TASK) -> list[MessageRecord]:
    log = ConversationLog(h.home.conversations)
    records: list[MessageRecord] = []
    for path in ConversationLog.files(log.chat_dir(task_chat(task))):
        records += [decode_record(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return records


def held_reply(h: Harness, text: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Script a reply the server holds until released; `arrived` is set when its request is in."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        arrived.set()
        await release.wait()

    h.server.reply_text(text, before=hold)
    return arrived, release


async def tool_results(h: Harness, chat: ChatRef = CHAT) -> list[str]:
    return [m.text for m in await h.engine.chats.history(chat) if m.type == "tool_result"]


async def chat_contents(h: Harness, chat: ChatRef = CHAT) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in await h.engine.chats.history(chat)]


async def test_a_run_is_logged_to_its_task_jsonl_only_and_its_answer_injected(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("current_time", {})])
        h.server.reply_text("It is nine; nothing else.")
        outcome = await runner(h).spawn(SubagentRequest(TASK, "What time is it?", inject_into=CHAT))
        assert (outcome.status, outcome.delivered) == (RunStatus.COMPLETED, True)
        path = h.home.conversations / "scheduler_digest" / "2026-01-01.jsonl"
        assert path.is_file()
        records = task_log(h)
        assert [(r.role, r.type) for r in records] == [
            (Role.USER, MessageType.TEXT),
            (Role.ASSISTANT, MessageType.TOOL_CALL),
            (Role.TOOL, MessageType.TOOL_RESULT),
            (Role.ASSISTANT, MessageType.TEXT),
        ]
        assert all(r.chat == task_chat(TASK) for r in records)
        assert records[-1].metadata == {"run_status": "completed"}
        # Not a chat: no session and no messages stored, so nothing to embed either.
        assert await h.engine.chats.sessions(task_chat(TASK)) == []
        # The answer is the target chat's message now, marked as coming from the task.
        assert await chat_contents(h) == [("assistant", "It is nine; nothing else.")]
        # the record's metadata is storage's, not the history a person reads: read from the store
        injected = await h.engine.store.messages.window((await h.engine.store.segments.current(CHAT)).id, 1)
        assert injected[0].record.metadata == {"source": "task", "task": TASK, "origin": "schedule"}
        assert [(o.chat, o.text, o.kind) for o in h.delivered] == [(CHAT, "It is nine; nothing else.", "reply")]
        # The task's request never reached a chat window: the person's next turn sees only the injected answer.
        await h.turn("thanks")
        assert [m["content"] for m in h.last_request_messages() if m["role"] != "system"] == [
            "It is nine; nothing else.",
            "thanks",
        ]


async def test_task_logs_are_not_replayed_into_the_database_at_start_up(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await runner(h).spawn(SubagentRequest(TASK, "go"))
    async with running_engine(tmp_path) as h:
        assert await h.engine.chats.sessions(task_chat(TASK)) == []
        assert len(task_log(h)) == 2


async def test_the_model_is_the_tasks_else_the_subagent_route_else_the_default(tmp_path: Path) -> None:
    async with running_engine(tmp_path, routing={"tasks": {"subagent": "fake/large"}}) as h:
        await runner(h).spawn(SubagentRequest(TASK, "go"))
        await runner(h).spawn(SubagentRequest("pinned", "go", model="fake/small"))
        assert [r.body["model"] for r in h.server.chat_requests] == ["large", "small"]
    async with running_engine(tmp_path / "b") as h:
        await runner(h).spawn(SubagentRequest(TASK, "go"))
        assert h.server.chat_requests[-1].body["model"] == "small"
        with pytest.raises(ValueError, match="unknown model 'nope/x'"):
            runner(h).spawn(SubagentRequest(TASK, "go", model="nope/x"))


async def test_a_failed_run_still_ends_its_block_and_tells_the_chat(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_error(500, message="boom")
        outcome = await runner(h).spawn(SubagentRequest(TASK, "first", inject_into=CHAT))
        assert (outcome.status, outcome.delivered) == (RunStatus.FAILED, False)
        assert [o.kind for o in h.delivered] == ["notice"]
        assert "The task 'digest' could not run" in h.delivered[0].text
        final = task_log(h)[-1]
        assert (final.role, final.metadata) == (Role.ASSISTANT, {"run_status": "failed"})
        await runner(h).spawn(SubagentRequest(TASK, "second"))
        sent = [m["content"] for m in h.last_request_messages() if m["role"] != "system"]
        assert sent == ["first", "(no answer: this run failed: LlmServerError)", "second"]


async def test_a_run_cut_off_by_a_crash_is_closed_when_the_task_next_runs(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        chat = task_chat(TASK)
        directory = h.home.conversations / "scheduler_digest"
        directory.mkdir(parents=True)
        crashed = MessageRecord(chat, Role.USER, "the crashed request", created_at=h.clock.now())
        (directory / "2026-01-01.jsonl").write_text(encode_record(crashed) + "\n", encoding="utf-8")
        await runner(h).spawn(SubagentRequest(TASK, "next request"))
        assert [r.content for r in task_log(h)] == [
            "the crashed request",
            INTERRUPTED_TEXT,
            "next request",
            "echo: next request",
        ]
        assert task_log(h)[1].metadata == {"run_status": "interrupted"}
        # The crashed block is a closed run of its own, not part of the next one.
        sent = [m["content"] for m in h.last_request_messages() if m["role"] != "system"]
        assert sent == ["the crashed request", INTERRUPTED_TEXT, "next request"]


async def test_a_task_never_runs_twice_at_once(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        release = asyncio.Event()
        h.server.reply_text("done", before=release.wait)
        first = runner(h).spawn(SubagentRequest(TASK, "go"))
        with pytest.raises(TaskBusy, match="already in progress"):
            runner(h).spawn(SubagentRequest(TASK, "again"))
        assert runner(h).running == [TASK]
        release.set()
        await first
        assert runner(h).running == []


async def test_subagent_spawn_from_a_conversation_answers_back_in_that_chat(tmp_path: Path) -> None:
    # One slot: the turn keeps it to its end, so the scripted replies go to the turn, in order.
    async with running_engine(tmp_path, processing={"maxConcurrentLlm": 1}) as h:
        h.server.reply_tool_calls([("subagent_spawn", {"task_name": "research", "message": "find three sources"})])
        h.server.reply_text("I started the research; results will follow.")
        reply = await h.turn("please research this in the background")
        assert reply.text == "I started the research; results will follow."
        async with asyncio.timeout(10):
            await runner(h).wait_for_completed(1)
        await h.wait_for_replies(2)
        assert (h.delivered[-1].chat, h.delivered[-1].text) == (CHAT, "echo: find three sources")
        assert task_log(h, "spawn:research")[0].metadata == {"origin": "spawn"}
        # The turn was not blocked by the run: its tool result only says the run started.
        started = "Started a run of 'research'; its answer will arrive in this chat when it is done."
        assert await tool_results(h) == [started]


async def test_a_run_is_not_offered_subagent_spawn_and_cannot_call_it(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("subagent_spawn", {"task_name": "again", "message": "x"})])
        h.server.reply_text("ok")
        await runner(h).spawn(SubagentRequest(TASK, "go"))
        offered = [t["function"]["name"] for t in h.server.chat_requests[0].body["tools"]]
        assert "subagent_spawn" not in offered and "schedule_list" in offered
        result = next(r for r in task_log(h) if r.type is MessageType.TOOL_RESULT)
        assert result.metadata is not None and result.metadata["is_error"] is True
        assert result.content.startswith("unknown tool 'subagent_spawn'; available tools: ")
        assert runner(h).completed == 1


async def test_a_run_can_neither_add_tasks_nor_remove_the_persons(tmp_path: Path) -> None:
    """A run was offered schedule_add and schedule_remove (adversary15): a seed task every 30 minutes grew to 28
    tasks in five steps of the clock, and its first run deleted the person's own task, leaving only a line in
    its answer. A run may list the tasks; adding and removing are the person's and their chats' (decision 372)."""
    async with running_engine(tmp_path, scheduler={"timezone": "UTC"}) as h:
        assert h.engine.scheduler is not None
        await h.engine.scheduler.add_task("persons-task", TaskSchedule.cron("0 8 * * *"), "brief me")
        h.server.reply_tool_calls(
            [
                ("schedule_add", {"name": "seed2", "message": "add more tasks", "every": "30m"}),
                ("schedule_remove", {"name": "persons-task"}),
                ("schedule_list", {}),
            ]
        )
        h.server.reply_text("ok")
        await runner(h).spawn(SubagentRequest(TASK, "go"))
        offered = {t["function"]["name"] for t in h.server.chat_requests[0].body["tools"]}
        assert not offered & {"schedule_add", "schedule_remove"}
        results = [r for r in task_log(h) if r.type is MessageType.TOOL_RESULT]
        assert [r.content.split(";")[0] for r in results[:2]] == [
            "unknown tool 'schedule_add'",
            "unknown tool 'schedule_remove'",
        ]
        assert "persons-task" in results[2].content
        assert [t.name for t in await h.engine.scheduler.list_tasks()] == ["persons-task"]


async def test_schedule_add_from_a_chat_reports_to_that_chat(tmp_path: Path) -> None:
    async with running_engine(tmp_path, scheduler={"timezone": "UTC"}) as h:
        h.server.reply_tool_calls([("schedule_add", {"name": "morning", "message": "Brief me", "cron": "0 8 * * 1-5"})])
        h.server.reply_tool_calls([("schedule_add", {"name": "morning", "message": "dup", "every": "1h"})])
        h.server.reply_tool_calls([("schedule_list", {}), ("schedule_remove", {"name": "nope"})])
        h.server.reply_text("Scheduled.")
        await h.turn("brief me every weekday at eight")
        assert h.engine.scheduler is not None
        tasks = await h.engine.scheduler.list_tasks()
        assert [(t.name, t.schedule, t.inject_into) for t in tasks] == [
            ("morning", TaskSchedule.cron("0 8 * * 1-5"), CHAT)
        ]
        added, duplicate, listed, missing = await tool_results(h)
        added, listed = json.loads(added), json.loads(listed)
        assert added["next_run"].startswith("2026-01-02T08:00") and added["reports_to"] == "console:me"
        assert "a task named 'morning' already exists" in duplicate
        assert [t["name"] for t in listed] == ["morning"]
        assert "there is no task named 'nope'" in missing


async def test_interactive_turns_are_served_before_waiting_subagents(tmp_path: Path) -> None:
    """All slots held; a subagent queues first, an interactive turn later: the turn is served first."""
    async with running_engine(tmp_path, processing={"maxConcurrentLlm": 1}) as h:
        arrived, release = held_reply(h, "first turn")
        await h.say("hold the only slot")
        await h.clock.advance(1.5)
        async with asyncio.timeout(10):
            await arrived.wait()  # the held request has crossed real HTTP
        run = runner(h).spawn(SubagentRequest(TASK, "background work"))
        await settle()
        await h.say("urgent", OTHER)
        await h.clock.advance(1.5)
        slots = h.engine.processor.slots
        async with asyncio.timeout(10):
            while slots.queue_depth < 2:  # noqa: ASYNC110 - the turn builds its context (threads) before it queues
                await asyncio.sleep(0.01)
        assert (slots.in_use, slots.queue_depth) == (1, 2)
        release.set()
        await run
        await h.wait_for_replies(2)
        served = [r.body["messages"][-1]["content"] for r in h.server.chat_requests]
        assert served == ["hold the only slot", "urgent", "background work"]


async def test_shutdown_waits_for_runs_in_flight(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        arrived, release = held_reply(h, "finished")
        run = runner(h).spawn(SubagentRequest(TASK, "long job", inject_into=CHAT))
        async with asyncio.timeout(10):
            await arrived.wait()
        shutdown = asyncio.create_task(h.engine.shutdown(timeout_seconds=10))
        await settle()
        assert not shutdown.done()
        with pytest.raises(RuntimeError, match="shutting down"):
            runner(h).spawn(SubagentRequest("late", "x"))
        release.set()
        await shutdown
        assert (await run).delivered
        assert task_log(h)[-1].content == "finished"


async def test_the_scheduler_channel_is_reserved(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        with pytest.raises(ValueError, match="reserved for scheduled tasks"):
            await h.engine.submit(ChatRef("scheduler", TASK), "hello")


async def test_status_shows_tasks_and_runs(tmp_path: Path) -> None:
    async with running_engine(tmp_path, scheduler={"timezone": "UTC"}) as h:
        assert h.engine.scheduler is not None
        await h.engine.scheduler.add_task("daily", TaskSchedule.cron("0 8 * * *"), "x")
        release = asyncio.Event()
        h.server.reply_text("ok", before=release.wait)
        run = runner(h).spawn(SubagentRequest(TASK, "go"))
        status = (await h.engine.submit(CHAT, "/status")).command_reply or ""
        assert "Scheduled tasks: 1, subagent runs in progress: 1 (digest); next: daily at 2026-01-02T08:00" in status
        release.set()
        await run
