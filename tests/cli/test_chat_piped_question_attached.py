"""A tool's question in a piped `klaw chat` attached to `klaw serve` (decision 516, found by adversary30).

The pipe printed the question and left with status 3, the question open: the console chat's turn then held
the next pipe's message, silent, for `tools.approvalTimeoutSeconds` (306 s), and that pipe printed the first
one's reply on stderr as if its own. Now, as in process, the pipe ends its question as one nobody can answer
and prints the reply the turn goes on to; a pipe behind a question asked before its message says on stderr
what it waits for, and prints another message's reply only under a label. Real `klaw serve`, real piped
`klaw chat` processes, the fake model scripting the tool calls.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from klaw.channels.console_attached import OTHER_MESSAGE
from klaw.engine.frames import AckFrame, CommandFrame, InboundFrame, QueryFrame, ResultFrame
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import USER, chat_env, init_home
from tests.cli.piped_chat import CHAT_SECONDS, piped, started_chat
from tests.cli.test_chat_terminal_approval import hold_file_write
from tests.engine import GatewayClient
from tests.serve_helpers import STARTS_WITHIN, running, web_page

NO_TERMINAL = "a piped klaw chat has no terminal to ask you in"


async def left_open(home: Path, text: str) -> str:
    """A question left open in the console chat: `text` sent for it on engine.sock by a client that leaves
    before it is asked (as a killed pipe, or a terminal that left), the question's id once it waits."""
    socket = KlawHome(home).socket_path
    sender = await GatewayClient.connect(socket)
    try:
        await sender.send(InboundFrame(id="left-open", channel="console", chat_id=USER, text=text))
        assert await sender.recv() == AckFrame(id="left-open")
    finally:
        await sender.aclose()
    asker = await GatewayClient.connect(socket)
    try:
        async with asyncio.timeout(STARTS_WITHIN):
            while True:
                params = {"channel": "console", "chat_id": USER}
                await asker.send(QueryFrame(id="q", query="approvals", params=params))
                answer = await asker.recv()
                assert isinstance(answer, ResultFrame) and isinstance(answer.data, dict), answer
                if questions := answer.data["approvals"]:
                    return str(questions[0]["id"])
                await asyncio.sleep(0.1)
    finally:
        await asker.aclose()


async def answer_elsewhere(home: Path, verb: str, request_id: str) -> None:
    other = await GatewayClient.connect(KlawHome(home).socket_path)
    try:
        await other.send(CommandFrame(id="elsewhere", channel="console", chat_id=USER, command=verb, args=request_id))
        assert await other.recv() == AckFrame(id="elsewhere")
    finally:
        await other.aclose()


def _serve_env(home: Path, base_url: str) -> dict[str, str]:
    init_home(home)
    hold_file_write(home)
    return {**chat_env(home, base_url), "KLAW__CHANNELS__WEB__PORT": "0"}


async def test_a_piped_question_is_ended_at_once_and_the_next_pipe_is_not_held(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        env = _serve_env(home, model.base_url)
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_tool_calls([("file_write", {"path": "p.txt", "content": "p"})])
            model.reply_text("Not written: nobody could approve it.")
            code, out, err = await piped(env, "x\nwrite p.txt")
            said = " ".join(err.split())
            # As in process: the question and why it did not run on stderr, the reply on stdout, exit 0.
            assert (code, out) == (0, "Not written: nobody could approve it.\n"), err
            assert "The agent wants to run file_write" in said and NO_TERMINAL in said, err
            assert "/approve" not in said and "Traceback" not in said, err
            assert not (home / "workspace" / "p.txt").exists()
            result = json.dumps(model.chat_requests[-1].body)
            assert "nobody was asked: the message was piped" in result  # not "the person denied"
            # The console chat is free: the next pipe's message is answered now, and only its reply is shown.
            model.reply_text("the answer to pipe Q")
            code, out, err = await piped(env, "pipe Q")
            assert (code, out) == (0, "the answer to pipe Q\n"), err
            assert "Not written" not in err and "Not run" not in err, err


async def test_a_pipe_behind_an_earlier_question_says_so_and_prints_only_its_own_reply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        env = _serve_env(home, model.base_url)
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_tool_calls([("file_write", {"path": "a.txt", "content": "a"})])
            model.reply_text("Not written A.")
            model.reply_text("the answer to pipe Q")
            request_id = await left_open(home, "write a.txt")
            pipe = await started_chat(env, b"pipe Q")
            assert pipe.stderr is not None
            seen = ""
            async with asyncio.timeout(CHAT_SECONDS):  # it said nothing for the question's whole timeout
                while f"/deny {request_id})" not in " ".join(seen.split()):
                    line = (await pipe.stderr.readline()).decode()
                    assert line, f"the pipe ended without saying what it waits for: {seen}"
                    seen += line
            said = " ".join(seen.split())
            assert said.startswith("waiting: an earlier question in this chat holds its turn"), said
            assert f"(file_write, request {request_id}; no answer in the " in said, said
            assert "left means no); this message is answered after it" in said, said
            assert pipe.returncode is None  # the pipe's message waits behind the question, not refused
            await answer_elsewhere(home, "deny", request_id)  # the earlier turn goes on to its reply
            out, err = await asyncio.wait_for(pipe.communicate(), timeout=CHAT_SECONDS)
            assert (await pipe.wait(), out.decode()) == (0, "the answer to pipe Q\n"), err.decode()
            rest = " ".join(err.decode().split())
            # The earlier message's reply came to this pipe: shown under its label, never as this one's.
            assert f"{OTHER_MESSAGE} Not written A." in rest, rest
            assert not (home / "workspace" / "a.txt").exists()


async def test_a_pipe_killed_while_its_turn_runs_leaves_no_question_open(tmp_path: Path) -> None:
    """A pipe killed (`kill`) while its turn is in the model: the question that turn then asks has nobody to
    ask. It stayed open for `tools.approvalTimeoutSeconds` (the console chat held all that while); now the
    engine, told by the pipe that it is one, ends it as nobody can answer it, the model told so (decision 521)."""
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        env = _serve_env(home, model.base_url)
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            release = asyncio.Event()
            model.reply_tool_calls([("file_write", {"path": "k.txt", "content": "k"})], before=release.wait)
            model.reply_text("Not written: the pipe had gone.")
            asked = len(model.chat_requests)
            pipe = await started_chat(env, b"write k.txt")
            async with asyncio.timeout(CHAT_SECONDS):
                while len(model.chat_requests) <= asked:  # noqa: ASYNC110 - the turn is in the model
                    await asyncio.sleep(0.05)
            pipe.terminate()
            await asyncio.wait_for(pipe.communicate(), timeout=CHAT_SECONDS)
            release.set()  # the model asks for file_write now, the pipe gone
            async with asyncio.timeout(CHAT_SECONDS):  # not the 5 minutes of the approval timeout
                while len(model.chat_requests) <= asked + 1:  # noqa: ASYNC110 - the turn goes on to its reply
                    await asyncio.sleep(0.05)
            result = json.dumps(model.chat_requests[-1].body)
            assert "nobody was asked: the message was piped" in result, result
            assert not (home / "workspace" / "k.txt").exists()
            # The console chat is free: the next pipe is answered at once, with its own reply only.
            model.reply_text("the answer to pipe R")
            code, out, err = await piped(env, "pipe R")
            assert (code, out) == (0, "the answer to pipe R\n"), err
