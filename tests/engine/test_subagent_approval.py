"""A subagent spawned from a live chat asks that chat's person for a held tool (decision 525, item 1).

newcomer23: with `tools.approval: [file_write]`, `!subagent_spawn {... "message": "!file_write {...}"}` in
`klaw chat` was refused "a scheduled task's run has nobody to ask": the person was at the prompt, and
subagent_spawn has no allow_tools. Driven through the engine's socket with the stand-in model's `!tool {json}`
convention, as a person drives `python -m klaw.llm.fake_server`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from klaw.engine.frames import OutboundFrame
from klaw.llm.stand_in import stand_in_reply
from tests.engine.test_tool_approval import COMMAND, QUESTION_ID, WEB, Stand, stand


def spawn_text(task: str) -> str:
    inner = "!host_exec " + json.dumps({"command": COMMAND})
    return "!subagent_spawn " + json.dumps({"task_name": task, "message": inner})


async def until_question(s: Stand) -> tuple[str, OutboundFrame, list[OutboundFrame]]:
    """The frames up to the approval question (the spawning turn's own reply may come first)."""
    seen: list[OutboundFrame] = []
    async with asyncio.timeout(30):
        while True:
            frame = await s.outbound()
            if (found := QUESTION_ID.search(frame.text)) is not None:
                return found.group(1), frame, seen
            seen.append(frame)


async def test_a_subagent_spawned_from_a_chat_asks_its_person_and_runs_the_tool_once_approved(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.default_reply = stand_in_reply
        await s.ask(spawn_text("held"))
        request_id, question, _ = await until_question(s)
        assert question.text.startswith(
            "The subagent 'held', which the agent spawned from this chat, wants to run host_exec:\n```\n"
            f"command: {COMMAND}\n```\n/approve {request_id} or /deny {request_id}"
        ), question.text
        assert question.approval == request_id  # the console's y/N and the web page's buttons answer it
        assert "scheduled task" not in question.text
        assert s.engine.approvals.waiting(WEB) == [request_id]
        await s.send(f"/approve {request_id}")
        texts = [(await s.outbound()).text]
        while not any("The tool answered: ran:" in t for t in texts):
            texts.append((await s.outbound()).text)
        assert "Approved: host_exec runs now." in texts
        assert s.ran == [COMMAND]


async def test_a_subagents_call_denied_by_the_person_is_not_run_and_its_run_is_told(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.default_reply = stand_in_reply
        await s.ask(spawn_text("nosy"))
        request_id, _, _ = await until_question(s)
        await s.send(f"/deny {request_id}")
        texts = [(await s.outbound()).text]
        while not any("The tool answered: Not run: the person denied host_exec" in t for t in texts):
            texts.append((await s.outbound()).text)
        assert s.ran == []
