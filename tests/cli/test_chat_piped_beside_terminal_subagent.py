"""A pipe beside an attached terminal names a subagent's question as the terminal does (decision 535, item 3).

The pipe's message spawns a subagent whose held `file_write` is asked in the console chat (decision 525) while
the pipe still waits for its own reply. The pipe said "waiting: a question to approve a tool (request …)": its
reading of the question knew only "The agent wants to run NAME". It now says what the terminal shows: "The
subagent 'held', which the agent spawned from this chat, wants to run file_write".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klaw.llm.fake_server import FakeOpenAiServer, Reply
from klaw.llm.stand_in import stand_in_reply
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.piped_chat import started_chat
from tests.cli.test_chat_attached import CHAT, folded
from tests.cli.test_chat_terminal_approval import APPROVE, hold_file_write
from tests.serve_helpers import STARTS_WITHIN, running, web_page

WANTS = "The subagent 'held', which the agent spawned from this chat, wants to run file_write"


class _HeldAfterSpawn(FakeOpenAiServer):
    """The stand-in model, the spawning turn's answer after `subagent_spawn` held until `go` is set."""

    go: asyncio.Event

    async def _next(self, endpoint: Any, body: Any) -> Reply | None:
        messages = body.get("messages", []) if isinstance(body, Mapping) else []
        spawned = any(
            call.get("function", {}).get("name") == "subagent_spawn"
            for message in messages
            if isinstance(message, dict)
            for call in message.get("tool_calls") or []
            if isinstance(call, dict)
        )
        if endpoint == "chat" and spawned:
            await self.go.wait()
        return await super()._next(endpoint, body)


@needs_tmux
async def test_a_pipe_beside_a_terminal_names_a_subagents_question_as_the_terminal_does(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    inner = "!file_write " + json.dumps({"path": "sub.txt", "content": "x"})
    model = _HeldAfterSpawn(default_reply=stand_in_reply)
    model.go = asyncio.Event()
    async with model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            (tmp_path / "term").mkdir()
            async with terminal(CHAT, env, tmp_path / "term") as term:
                await term.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                spawn = "!subagent_spawn " + json.dumps({"task_name": "held", "message": inner})
                pipe = await started_chat(env, spawn.encode())
                screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the subagent's question")
                assert f"{WANTS}:" in screen
                model.go.set()  # the pipe's turn answers; the subagent's question stays the terminal's
                out, err = await asyncio.wait_for(pipe.communicate(), timeout=STARTS_WITHIN)
                said = folded(err.decode())
                assert await pipe.wait() == 0, said
                assert out.decode().startswith("The tool answered: "), said
                assert f"waiting: {WANTS} (request " in said, said
                assert "a tool" not in said and "waits for that answer, this message's reply does not" in said, said
                await term.type_line("y")
                await term.wait_for(lambda s: "Approved: file_write runs now." in s, "the answer taken")
                ran = "The tool answered: "
                await term.wait_for(lambda s: ran in s.split("Approved: file_write")[-1], "its answer")
                assert (home / "workspace" / "sub.txt").read_text(encoding="utf-8") == "x"
                await term.type_line("/exit")
                assert await term.exit_status() == 0
