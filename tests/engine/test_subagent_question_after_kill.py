"""A subagent's open approval question at a kill -9, at the next start (decision 535, item 4).

A subagent spawned from a chat asks that chat's person (decision 525); its open question is noted in
approvals-open.json under the run's own chat, where the engine looks after a crash (decision 447). The run is
not run again after a kill (decision 307), so no turn of its chat ever took the note: it stayed in the file at
every start, and the person was told only that the run was cut off. Now the next start writes the call's result
into the run's log as never approved, as a chat's first turn does for its own, clears the note, and the
spawning chat's notice says the tool did not run.

`klaw serve` as a person runs it (a real SQLite file), the console chat through its socket, the stand-in model.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from klaw.engine.frames import HelloFrame, InboundFrame, OutboundFrame
from klaw.engine.interrupted_exchanges import NEVER_APPROVED
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.stand_in import stand_in_reply
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.test_chat_terminal_approval import hold_file_write
from tests.engine import GatewayClient
from tests.serve_helpers import running, web_page


async def _console(home: Path) -> GatewayClient:
    console = await GatewayClient.connect(home / "engine.sock")
    await console.send(HelloFrame(channels=["console"]))
    await console.roundtrip()
    return console


async def _next_outbound(console: GatewayClient) -> OutboundFrame:
    while not isinstance(frame := await console.recv(), OutboundFrame):
        pass
    return frame


async def test_a_subagents_question_open_at_a_kill_is_told_not_run_and_its_note_cleared(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    inner = "!file_write " + json.dumps({"path": "sub.txt", "content": "x"})
    spawn = "!subagent_spawn " + json.dumps({"task_name": "held", "message": inner})
    async with FakeOpenAiServer(default_reply=stand_in_reply) as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            console = await _console(home)
            await console.send(InboundFrame(id="m1", channel="console", chat_id="me", text=spawn, whole=True))
            asked = None
            while asked is None:
                frame = await _next_outbound(console)
                asked = frame if frame.approval is not None else None
            assert "The subagent 'held', which the agent spawned from this chat, wants to run file_write" in asked.text
            noted = json.loads((home / "approvals-open.json").read_text(encoding="utf-8"))
            assert [key.split("\u0000")[0] for key in noted] == ["scheduler"], noted  # under the run's chat
            serve.send_signal(signal.SIGKILL)
            await serve.wait()
            await console.aclose()
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            console = await _console(home)
            told = await _next_outbound(console)
            assert "The subagent run 'held'" in told.text and "was cut off" in told.text, told.text
            assert "file_write" in told.text and "never approved" in told.text, told.text  # what the question was
            noted = json.loads((home / "approvals-open.json").read_text(encoding="utf-8"))
            assert noted == {}, noted  # nothing of the run left for a later start to find
            await console.aclose()
    assert not (home / "workspace" / "sub.txt").exists()
    # The run's log says so too: a later run of the name reads the call as never approved, not as unknown.
    logged = [p.read_text(encoding="utf-8") for p in (home / "conversations").rglob("*") if p.is_file()]
    assert any(NEVER_APPROVED in text and "held" in text for text in logged) or any(
        json.dumps(NEVER_APPROVED)[1:-1] in text for text in logged
    ), logged
