"""`klaw chat` as a person uses it: a real process in a real terminal (tmux), typing and reading.

The chat runs as `python -m klaw chat` in a detached tmux session on a private tmux server, with
KLAW_HOME made by `klaw init` and the default model pointed by `KLAW__…` overrides at a
`FakeOpenAiServer` in this test's event loop. Every tmux call is an asyncio subprocess so the loop
keeps serving the model's HTTP requests; waits poll the screen under a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import (
    DEADLINE_SECONDS,
    USER,
    Terminal,
    chat_env,
    chat_without_a_terminal,
    closed_port,
    greeted_chat,
    init_home,
    needs_tmux,
)


@needs_tmux
async def test_klaw_chat_in_a_terminal_answers_runs_commands_and_exits_cleanly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        async with greeted_chat(env, tmp_path) as term:
            assert "model FAKE" in await term.screen()

            await term.type_line("hello from the terminal")
            await term.wait_for_prompt_after("echo: hello from the terminal", "the model's reply")
            sent = model.chat_requests[-1].body["messages"]
            assert sent[-1] == {"role": "user", "content": "hello from the terminal"}

            await term.type_line("/status")
            screen = await term.wait_for_prompt_after("LLM slots in use:", "the /status reply")
            assert "Model: FAKE" in screen
            assert "Queue depth: 0 waiting for an LLM slot" in screen

            await term.type_line("/new")
            await term.wait_for_prompt_after("Started a new conversation", "the /new reply")

            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
            assert "Traceback" not in await term.screen()
        assert len(model.chat_requests) == 1  # the commands never reached the model

    logs = sorted((home / "conversations").glob(f"console_{USER}/*.jsonl"))
    assert logs, f"no conversation log under {home / 'conversations'}"
    records = [json.loads(line) for path in logs for line in path.read_text(encoding="utf-8").splitlines()]
    said = [r for r in records if r["type"] in ("text", "session_break")]  # not the exchange bookkeeping
    assert [(r["role"], r["type"], r["content"]) for r in said] == [
        ("user", "text", "hello from the terminal"),
        ("assistant", "text", "echo: hello from the terminal"),
        ("system", "session_break", ""),
    ]
    assert not (home / "engine.sock").exists()  # shut down, not killed


@dataclass
class Thinking:
    """A `klaw chat` whose model holds the answer to "a slow question" until `release` is set."""

    home: Path
    term: Terminal
    release: asyncio.Event


@asynccontextmanager
async def model_thinking(tmp_path: Path) -> AsyncIterator[Thinking]:
    """A chat in a terminal with its first turn in flight: the model has the request and holds it."""
    home = tmp_path / "home"
    init_home(home)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_model() -> None:
        started.set()
        await release.wait()

    async with FakeOpenAiServer() as model:
        model.reply_text("the late answer", before=slow_model)
        env = chat_env(home, model.base_url)
        async with greeted_chat(env, tmp_path) as term:
            await term.type_line("a slow question")
            async with asyncio.timeout(DEADLINE_SECONDS):
                await started.wait()
            yield Thinking(home, term, release)
    assert not (home / "engine.sock").exists()  # shut down, not killed


@needs_tmux
async def test_ctrl_c_while_the_model_thinks_cancels_the_turn_and_the_prompt_comes_back(tmp_path: Path) -> None:
    """Ctrl-C mid-turn cancels the turn (decision 490; before, it stopped the whole chat after the reply in
    flight): the prompt comes back, the late answer is never shown, and the chat goes on."""
    async with model_thinking(tmp_path) as chat:
        await chat.term.tmux("send-keys", "-t", chat.term.target, "C-c")
        await chat.term.wait_for_prompt_after("Cancelled: this turn was stopped", "the cancelled turn")
        chat.release.set()
        await chat.term.type_line("still there?")
        await chat.term.wait_for_prompt_after("echo: still there?", "the next reply")
        await chat.term.tmux("send-keys", "-t", chat.term.target, "C-d")
        assert await chat.term.exit_status() == 0
        screen = await chat.term.screen()
        assert "the late answer" not in screen and "stopping: finishing" not in screen
        assert "Traceback" not in screen


@needs_tmux
async def test_ctrl_d_while_the_model_thinks_shows_the_reply_then_exits(tmp_path: Path) -> None:
    """Ctrl-D pressed while the spinner runs means leave, as at an empty prompt: the turn's answer is
    shown first, then the chat ends (exit 0). In the terminal's line mode between prompts it was lost."""
    async with model_thinking(tmp_path) as chat:
        await chat.term.tmux("send-keys", "-t", chat.term.target, "C-d")
        chat.release.set()
        assert await chat.term.exit_status() == 0
        screen = await chat.term.screen()
        assert "the late answer" in screen
        assert "Traceback" not in screen


@needs_tmux
async def test_what_is_typed_while_the_model_thinks_waits_at_the_next_prompt(tmp_path: Path) -> None:
    """Typeahead is kept: the next message typed during the spinner is in the prompt when it returns."""
    async with model_thinking(tmp_path) as chat:
        term = chat.term
        await term.tmux("send-keys", "-t", term.target, "-l", "and the next one")
        chat.release.set()
        await term.wait_for(lambda s: s.rstrip().endswith("you › and the next one"), "the typeahead at the prompt")
        await term.tmux("send-keys", "-t", term.target, "Enter")
        await term.wait_for_prompt_after("echo: and the next one", "the reply to the typeahead")
        await term.tmux("send-keys", "-t", term.target, "C-d")
        assert await term.exit_status() == 0


def test_klaw_chat_without_a_reachable_model_says_what_to_configure(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    env = chat_env(home, f"http://127.0.0.1:{closed_port()}/v1")
    result = chat_without_a_terminal(env)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert "No model server answered at http://127.0.0.1:" in result.stderr
    # what happened, in words, not the exception's class ("ConnectError")
    assert "connection refused (nothing listens at that address and port)" in " ".join(result.stderr.split())
    assert "ConnectError" not in result.stderr
    assert "(routing.default = FAKE by KLAW__ROUTING__DEFAULT)" in result.stderr  # not "in engine.yaml"
    assert "ollama pull llama3.2" in result.stderr
    assert "KLAW__ROUTING__DEFAULT" in result.stderr
    # The stand-in's command names the interpreter klaw runs on: a bare `python` may have no klaw.
    assert f"`{shlex.quote(sys.executable)} -m klaw.llm.fake_server`" in " ".join(result.stderr.split())
    assert not (home / "klaw.db").exists()  # nothing was started
    unknown = chat_without_a_terminal(chat_env(home, "http://klaw-no-such-host.invalid/v1"))
    assert unknown.returncode == 2 and "the host name was not found" in unknown.stderr, unknown.stderr


@needs_tmux
async def test_ctrl_c_at_the_prompt_clears_a_typed_line_and_leaves_from_an_empty_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        async with greeted_chat(env, tmp_path) as term:
            await term.tmux("send-keys", "-t", term.target, "-l", "a line I changed my mind about")
            await term.wait_for(lambda s: "changed my mind" in s, "the typed line")
            await term.tmux("send-keys", "-t", term.target, "C-c")
            await term.wait_for(lambda s: "changed my mind" not in s, "the cleared line")
            await term.type_line("the line I meant")
            await term.wait_for_prompt_after("echo: the line I meant", "the reply")
            assert model.chat_requests[-1].body["messages"][-1] == {"role": "user", "content": "the line I meant"}
            await term.tmux("send-keys", "-t", term.target, "C-c")
            assert await term.exit_status() == 0
            assert "Traceback" not in await term.screen()
