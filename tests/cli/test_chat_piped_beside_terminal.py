"""`echo … | klaw chat` while a `klaw chat` terminal is attached to `klaw serve` (newcomer23, decision 527).

It printed "waiting for it to leave (up to 300 s…)" and, five minutes later, "not sent: … still attached",
exit 75: a script or cron job hung for nothing. Now the piped message goes into the console chat at once:
the terminal (tmux) shows its reply under a label, the pipe prints the reply on stdout, exit 0; a question
its turn asks is asked in the terminal, where a person can answer it, and the pipe waits for that.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from klaw.channels.console_attached import PIPED_IN
from klaw.channels.console_attached_pipe import BESIDE_TERMINAL
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.piped_chat import piped, started_chat
from tests.cli.test_chat_attached import CHAT, folded
from tests.cli.test_chat_terminal_approval import APPROVE, QUESTION, hold_file_write
from tests.serve_helpers import STARTS_WITHIN, running, web_page


@needs_tmux
async def test_a_pipe_beside_an_attached_terminal_is_answered_at_once_and_shown_there(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            (tmp_path / "term").mkdir()
            async with terminal(CHAT, env, tmp_path / "term") as term:
                await term.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                model.reply_text("the pipe's answer")
                code, out, err = await piped(env, "hello from cron")
                assert (code, out) == (0, "the pipe's answer\n"), err  # not 5 minutes then exit 75
                assert folded(BESIDE_TERMINAL) in folded(err), err
                assert "waiting for it to leave" not in err and "Traceback" not in err, err
                screen = await term.wait_for_prompt_after("the pipe's answer", "the piped reply in the terminal")
                assert screen.index(PIPED_IN) < screen.index("the pipe's answer")
                # The terminal shows the reply, not the piped message: the pipe says so (decision 528)
                assert "hello from cron" not in screen and "the terminal shows its reply" in folded(err), err
                # Its turn asks to run a tool: asked in the terminal, where someone can say yes.
                model.reply_tool_calls([("file_write", {"path": "beside.txt", "content": "from cron"})])
                model.reply_text("Wrote beside.txt.")
                pipe = await started_chat(env, b"write it from cron")
                screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the pipe's question")
                assert QUESTION in screen and "path: beside.txt" in screen
                assert pipe.returncode is None  # waiting for the answer given there
                await term.type_line("y")
                out_b, err_b = await asyncio.wait_for(pipe.communicate(), timeout=STARTS_WITHIN)
                said = folded(err_b.decode())
                assert (await pipe.wait(), out_b.decode()) == (0, "Wrote beside.txt.\n"), said
                assert "file_write (request " in said and "is asked in the attached `klaw chat` terminal" in said, said
                assert (home / "workspace" / "beside.txt").read_text(encoding="utf-8") == "from cron"
                await term.wait_for_prompt_after("Wrote beside.txt.", "the approved reply in the terminal")
                model.reply_text("still mine")  # the terminal goes on as before
                await term.type_line("and me?")
                await term.wait_for_prompt_after("still mine", "the terminal's own reply")
                await term.type_line("/exit")
                assert await term.exit_status() == 0
        assert len(model.chat_requests) == 4


@needs_tmux
async def test_a_pipe_beside_a_terminal_killed_leaves_its_question_to_the_terminal(tmp_path: Path) -> None:
    """Review of session 56 (decision 528): the pipe said it was `piped` (decision 521) beside a terminal too,
    so its kill (a cron timeout) ended the question the terminal was showing as nobody's to answer."""
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            (tmp_path / "term").mkdir()
            async with terminal(CHAT, env, tmp_path / "term") as term:
                await term.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                model.reply_tool_calls([("file_write", {"path": "kept.txt", "content": "from cron"})])
                model.reply_text("Wrote kept.txt.")
                pipe = await started_chat(env, b"write it from cron")
                await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the pipe's question")
                pipe.terminate()  # the cron job gives up; the person at the terminal is still there
                await asyncio.wait_for(pipe.communicate(), timeout=STARTS_WITHIN)
                await asyncio.sleep(1)  # the engine sees the pipe's connection close
                await term.type_line("y")
                await term.wait_for_prompt_after("Wrote kept.txt.", "the approved reply in the terminal")
                assert (home / "workspace" / "kept.txt").read_text(encoding="utf-8") == "from cron"
                # The killed pipe never cleaned up its own buffer folder (its message inside): the next pipe does.
                model.reply_text("the next one")
                assert (await piped(env, "again from cron"))[:2] == (0, "the next one\n")
                assert list((home / "gateway" / "terminal").glob("piped-*")) == []
                await term.type_line("/exit")
                assert await term.exit_status() == 0


def test_the_readme_says_a_pipe_beside_a_terminal_goes_in_at_once() -> None:
    """Review of session 56 (decision 528): README.md's `klaw chat` row still said a pipe waits for an attached
    terminal to leave, up to 300 s, then exits 75, which decision 527 ended."""
    row = next(
        line
        for line in (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| `klaw chat` |")
    )
    if "terminal to leave" in row:
        pytest.fail(row)
    assert "terminal attached, it goes into that terminal's chat at once" in row
