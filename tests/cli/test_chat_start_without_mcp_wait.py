"""`klaw chat` with an MCP server that is slow to start (newcomer8: the docs' weather server, 22-26 s for
`echo /exit | klaw chat`): `/exit` and the commands answer while the server is still starting, the prompt
comes before it is ready, and the first message to the model still waits for it (decision 376)."""

from __future__ import annotations

import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import init_home, needs_tmux, terminal
from tests.cli.piped_chat import piped
from tests.cli.test_chat_piped_mcp import offered, slow_notes


async def test_a_piped_exit_starts_no_engine_and_no_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    spawned = tmp_path / "spawned"
    async with FakeOpenAiServer() as model:
        assert await piped(slow_notes(home, model.base_url, delay=30, spawned=spawned), "/exit\n") == (0, "", "")
        assert not spawned.exists()  # before, the server was started and waited for (up to 90 s) to leave


async def test_a_piped_typo_and_help_are_answered_with_no_engine_and_no_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    spawned = tmp_path / "spawned"
    async with FakeOpenAiServer() as model:
        env = slow_notes(home, model.base_url, delay=30, spawned=spawned)
        code, out, err = await piped(env, "/statsu\n")
        assert (code, out) == (1, ""), err
        assert (
            " ".join(err.split())
            == "Unknown command /statsu (did you mean /status?). Type /help for the list of commands."
        )
        code, out, err = await piped(env, "/HELP\n")
        assert (code, err) == (0, ""), err
        assert out.startswith("Commands:\n/new — ")
        assert out.endswith("\n/exit — Leave klaw chat (also /quit or Ctrl-D)\n")
        # before, each started the engine and the server first (decision 431): seconds for a typo
        assert not spawned.exists()
        assert model.chat_requests == []


async def test_a_piped_command_answers_while_the_server_is_still_starting(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = slow_notes(home, model.base_url, delay=30, spawned=tmp_path / "spawned")
        code, out, err = await piped(env, "/status\n")
        assert code == 0, err
        assert "MCP notes: starting" in out, out  # before, /status waited for it: "MCP notes: ready, 6 tool(s)"
        assert model.chat_requests == []


@needs_tmux
async def test_the_prompt_comes_before_the_server_and_the_first_message_waits_for_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("noted")
        gate = tmp_path / "gate"  # the server starts once /status has seen it starting
        env = {
            **slow_notes(home, model.base_url, delay=60, spawned=tmp_path / "spawned", gate=gate),
            "KLAW__MCP__STARTWAITSECONDS": "90",  # the terminal's start wait, set long: the message has the tools
        }
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("/status")
            screen = await term.wait_for_prompt_after("MCP notes:", "/status")
            assert "MCP notes: starting" in screen, screen  # before, the prompt came once it was ready
            gate.touch()
            await term.type_line("add 2 and 3")
            await term.wait_for_prompt_after("noted", "the reply")
            assert "notes__add" in offered(model)
            await term.type_line("/exit")
            assert await term.exit_status() == 0
