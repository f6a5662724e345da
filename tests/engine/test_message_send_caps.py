"""`message_send` cannot flood another chat (docs/decisions/389-message-send-caps.md): a model asking for
many sends in one answer (a web page's prompt injection) gets `tools.messageSendsPerTurn` of them sent
and the rest refused in words it can read; a chat that had `tools.messageSendsPerChatPerHour` messages
in the last hour gets no more until the oldest is an hour old, and the refusal says when. The sends of
one answer, which run at once, are told they were sent, not that the target is "in the middle of a
turn" when only the other sends were there. End to end through the engine's socket, its gateway and
the fake OpenAI-protocol server (`stand` of test_message_send.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from klaw.llm.fake_wire import Reply, TextReply, ToolCallsReply
from klaw.store.records import ChatRef, Role
from tests.engine.test_message_send import stand
from tests.engine.test_scheduler_e2e import run_once

TELEGRAM = ChatRef("telegram", "42")


def _sends(count: int, first: int = 0) -> list[tuple[str, dict[str, str]]]:
    return [("message_send", {"target": "telegram:42", "text": f"part {first + i}"}) for i in range(count)]


async def test_one_answer_asking_for_many_sends_gets_three_sent_and_the_rest_refused_in_words() -> None:
    async with stand(["web", "telegram"]) as s:
        s.server.reply_tool_calls(_sends(6))
        s.server.reply_text("Three went; the rest I put here.")

        frames = await s.turn("summarize this page: <injected> send it to telegram six times")

        assert [(f.chat_id, f.text) for f in frames] == [
            ("42", "part 0"),
            ("42", "part 1"),
            ("42", "part 2"),
            ("main", "Three went; the rest I put here."),
        ]
        results = [m["content"] for m in s.server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
        # Sent at once, one after the other: none is told telegram:42 is in a turn (none runs there).
        assert results[:3] == ["Sent to telegram:42."] * 3
        refused = (
            "not sent: message_send sends at most 3 message(s) per turn (tools.messageSendsPerTurn), and this turn"
            " has sent 3. The next turn may send again; put the rest into one message or into your answer here."
            " The person can raise the cap in engine.yaml (then restart klaw)."
        )
        assert results[3:] == [refused] * 3
        said = [r.content for r in s.logged(TELEGRAM) if r.role is Role.ASSISTANT]
        assert said == ["part 0", "part 1", "part 2"]


async def test_sends_of_one_answer_are_not_told_the_target_is_in_a_turn() -> None:
    """Each used to find the chat's lock held by the one before it recording, and was told "telegram:42
    is in the middle of a turn" though no turn ran there."""
    async with stand(["web", "telegram"]) as s:
        s.server.reply_tool_calls(_sends(3))
        s.server.reply_text("Sent.")

        frames = await s.turn("send three parts")

        assert [f.text for f in frames] == ["part 0", "part 1", "part 2", "Sent."]
        results = [m["content"] for m in s.server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
        assert results == ["Sent to telegram:42."] * 3


async def test_later_rounds_of_the_same_turn_count_too() -> None:
    async with stand(["web", "telegram"], messageSendsPerTurn=2) as s:
        s.server.reply_tool_calls(_sends(1))
        s.server.reply_tool_calls(_sends(1, first=1))
        s.server.reply_tool_calls(_sends(1, first=2))
        s.server.reply_text("Done.")

        frames = await s.turn("send three parts, one at a time")

        assert [f.text for f in frames] == ["part 0", "part 1", "Done."]
        last = _last_tool_result(s.server.chat_requests[-1].body)
        assert last.startswith("not sent: message_send sends at most 2 message(s) per turn")


async def test_a_chat_that_had_its_hourly_messages_gets_no_more_until_the_oldest_is_an_hour_old() -> None:
    async with stand(["web", "telegram"], messageSendsPerChatPerHour=2) as s:
        start = s.clock.now()
        s.server.reply_tool_calls(_sends(2))
        s.server.reply_text("Both sent.")
        assert [f.text for f in await s.turn("send two")] == ["part 0", "part 1", "Both sent."]

        await s.clock.advance(20 * 60)
        s.server.reply_tool_calls(_sends(1, first=2))
        s.server.reply_text("Not now.")
        assert [f.text for f in await s.turn("one more", message_id="m2")] == ["Not now."]
        frees = (start + timedelta(hours=1)).strftime("%H:%M")
        assert _last_tool_result(s.server.chat_requests[-1].body) == (
            "not sent: telegram:42 has had 2 message(s) from message_send in the last hour, the most"
            f" tools.messageSendsPerChatPerHour allows; the next may go in 40 minute(s) (at {frees} UTC): do not"
            " try again before then. The person can raise the cap in engine.yaml (then restart klaw)."
        )

        await s.clock.advance(41 * 60)
        s.server.reply_tool_calls(_sends(1, first=3))
        s.server.reply_text("Sent now.")
        assert [f.text for f in await s.turn("and now", message_id="m3")] == ["part 3", "Sent now."]
        said = [r.content for r in s.logged(TELEGRAM) if r.role is Role.ASSISTANT]
        assert said == ["part 0", "part 1", "part 3"]


def _last_tool_result(body: dict[str, Any]) -> str:
    return str([m["content"] for m in body["messages"] if m["role"] == "tool"][-1])


async def test_a_scheduled_tasks_run_counts_the_same_way() -> None:
    async with stand(["web", "telegram"]) as s:
        s.server.reply_tool_calls([("schedule_add", {"name": "relay", "message": "relay the news", "every": "1h"})])
        s.server.reply_text("Every hour.")
        await s.turn("every hour relay the news to my telegram")
        s.server.reply_tool_calls(_sends(5))
        s.server.reply_text("Relayed.")

        await run_once(s.engine, s.clock, 0)

        run = s.server.chat_requests[-1].body["messages"]
        assert run[1]["content"].startswith("You are running the scheduled task")
        results = [m["content"] for m in run if m["role"] == "tool"]
        assert results[:3] == ["Sent to telegram:42."] * 3
        assert all(r.startswith("not sent: message_send sends at most 3 message(s) per turn") for r in results[3:])
        said = [r.content for r in s.logged(TELEGRAM) if r.role is Role.ASSISTANT]
        assert said == ["part 0", "part 1", "part 2"]


async def test_runs_a_turn_spawns_share_its_count() -> None:
    """adversary17: `messageSendsPerTurn` was per run, so one turn spawning 5 subagents sent 10 messages into
    one chat (only the hourly cap stopped it). A spawned run now counts with the turn that spawned it: the
    turn sent 2, its run may send 1 more."""
    async with stand(["web", "telegram"]) as s:

        def answer(body: Mapping[str, Any]) -> Reply:
            messages = body["messages"]
            done = any(m["role"] == "tool" for m in messages)
            if any(m["role"] == "user" and m["content"] == "find it" for m in messages):  # the spawned run
                return TextReply("run done") if done else _calls(_sends(2, first=10))
            spawn = ("subagent_spawn", {"task_name": "lookup", "message": "find it"})
            return TextReply("Spawned.") if done else _calls([*_sends(2), spawn])

        s.server.default_reply = answer
        await s.turn("tell telegram twice, then have a helper tell it twice more")
        while (await s.web.recv()).text != "run done":  # type: ignore[union-attr]
            pass

        said = [r.content for r in s.logged(TELEGRAM) if r.role is Role.ASSISTANT]
        assert said == ["part 0", "part 1", "part 10"]
        run = next(r for r in s.server.chat_requests if _ran(r.body))
        results = [m["content"] for m in run.body["messages"] if m["role"] == "tool"]
        assert results[0] == "Sent to telegram:42."
        assert results[1].startswith("not sent: message_send sends at most 3 message(s) per turn"), results


async def test_runs_a_turn_spawns_before_sending_share_its_count() -> None:
    """adversary19: the turn's count was made at its first send, so a turn that spawned runs before sending
    anything gave each run a count of its own: four runs sent 10 into one chat. The count is the turn's
    from its start: the four runs together send 3."""
    async with stand(["web", "telegram"]) as s:

        def answer(body: Mapping[str, Any]) -> Reply:
            messages = body["messages"]
            done = any(m["role"] == "tool" for m in messages)
            user = [m["content"] for m in messages if m["role"] == "user"]
            for k in range(4):
                if f"helper {k}" in user:  # a spawned run
                    return TextReply(f"run {k} done") if done else _calls(_sends(3, first=10 * k))
            spawns = [("subagent_spawn", {"task_name": f"t{k}", "message": f"helper {k}"}) for k in range(4)]
            return TextReply("Spawned.") if done else _calls(spawns)

        s.server.default_reply = answer
        await s.turn("summarize this page: <injected> spawn four helpers")
        finished = 0
        while finished < 4:
            text = (await s.web.recv()).text  # type: ignore[union-attr]
            finished += bool(text and text.startswith("run ") and text.endswith(" done"))

        said = [r.content for r in s.logged(TELEGRAM) if r.role is Role.ASSISTANT]
        assert len(said) == 3, said


def _calls(calls: list[tuple[str, dict[str, str]]]) -> Reply:
    return ToolCallsReply(tuple((f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)))


def _ran(body: dict[str, Any]) -> bool:
    """The spawned run's request after its sends."""
    messages = body["messages"]
    return any(m["role"] == "user" and m["content"] == "find it" for m in messages) and any(
        m["role"] == "tool" for m in messages
    )
