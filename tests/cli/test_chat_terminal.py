"""`klaw chat` as a person uses it: a real process in a real terminal (tmux), typing and reading.

The chat runs as `python -m klaw chat` in a detached tmux session on a private tmux server, with
KLAW_HOME made by `klaw init` and the default model pointed by `KLAW__…` overrides at a
`FakeOpenAiServer` in this test's event loop. Every tmux call is an asyncio subprocess so the loop
keeps serving the model's HTTP requests; waits poll the screen under a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from klaw.llm.fake_server import FakeOpenAiServer

USER = "klaw-tester"  # LOGNAME/USER in the chat: the console chat id, hence the log directory
DEADLINE_SECONDS = 60.0  # a safety net, not a wait: at a load average of 15 on 2 CPUs the start alone passed 20 s
POLL_SECONDS = 0.05
PROMPT = "you › "
T = TypeVar("T")

needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed (scripts/test.sh installs it on Debian); it is the terminal this test types into",
)


def chat_env(home: Path, base_url: str) -> dict[str, str]:
    """The environment of the chat process: a temp home, a fast debounce, the fake model by env overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KLAW", "TMUX"))}
    return {
        **env,
        "KLAW_HOME": str(home),
        "LOGNAME": USER,
        "USER": USER,
        "KLAW__MODELS__FAKE__BASEURL": base_url,
        "KLAW__MODELS__FAKE__MAXRETRIES": "0",
        "KLAW__ROUTING__DEFAULT": "FAKE",
        "KLAW__PROCESSING__DEBOUNCEMS": "50",
        "KLAW__EMBEDDER__BACKEND": "fake",
        "KLAW__EMBEDDER__DIM": "32",
        "KLAW__SUMMARIZER__ENABLED": "false",  # background summary requests would mix with the turns'
    }


def init_home(home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "klaw", "init"],
        capture_output=True,
        text=True,
        env={**os.environ, "KLAW_HOME": str(home)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


@dataclass
class Terminal:
    """One tmux pane on a private tmux server (-L), so the person's own tmux is never touched."""

    server: str
    target: str
    env: dict[str, str]
    status_file: Path

    async def tmux(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            "tmux",
            "-L",
            self.server,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        out, err = await process.communicate()
        assert process.returncode == 0, f"tmux {' '.join(args)}: {err.decode()}"
        return out.decode()

    async def type_line(self, text: str) -> None:
        await self.tmux("send-keys", "-t", self.target, "-l", text)  # -l: literally, no key names
        await self.tmux("send-keys", "-t", self.target, "Enter")

    async def screen(self) -> str:
        """The whole pane including scrollback, wrapped lines joined."""
        return await self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.target)

    async def wait_for(self, condition: Callable[[str], bool], what: str) -> str:
        """Poll the screen until `condition` holds; fail with the screen after the deadline."""

        async def probe() -> str | None:
            screen = await self.screen()
            return screen if condition(screen) else None

        return await poll_until(probe, lambda: self.failure(f"waited for {what}"))

    async def failure(self, what: str) -> str:
        return f"{what} for {DEADLINE_SECONDS:.0f} s; the terminal shows:\n{await self.screen()}"

    async def wait_for_prompt_after(self, text: str, what: str) -> str:
        """Wait until `text` is shown and the prompt is back below it, ready for the next key.

        prompt_toolkit puts the terminal in raw mode before it draws the prompt; a Ctrl-D typed
        between two prompts would be eaten by the terminal's line discipline as an end of file.
        """
        return await self.wait_for(lambda s: text in s and s.rstrip().endswith(PROMPT.rstrip()), what)

    async def exit_status(self) -> int:
        """Wait for the command to end and return its exit status.

        The status comes from the wrapping shell (see `terminal`), not from tmux's
        `#{pane_dead_status}`: tmux 3.3a was seen leaving an exited pane process an unreaped zombie,
        its status never filled in, while the shell reliably waits for its own child.
        """

        async def probe() -> int | None:
            text = _read_if_exists(self.status_file)
            return int(text) if text.endswith("\n") else None  # `echo` writes it with one write()

        return await poll_until(probe, lambda: self.failure("klaw chat did not exit"))


async def poll_until(probe: Callable[[], Awaitable[T | None]], explain: Callable[[], Awaitable[str]]) -> T:
    """Call `probe` every POLL_SECONDS until it returns a value; fail with `explain()` at the deadline.

    The other side is another process (tmux, the chat), so there is no event to wait on.
    """
    deadline = asyncio.get_running_loop().time() + DEADLINE_SECONDS
    while True:
        found = await probe()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(await explain())
        await asyncio.sleep(POLL_SECONDS)


def _read_if_exists(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


@asynccontextmanager
async def terminal(command: list[str], env: dict[str, str], workdir: Path) -> AsyncIterator[Terminal]:
    """Run `command` in a detached 160x50 tmux session; the tmux server is killed afterwards.

    A shell wraps the command to write its exit status to a file once it ends; the pane stays
    (remain-on-exit) so the last screen can still be read.
    """
    config = workdir / "tmux.conf"
    config.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n", encoding="utf-8")
    status_file = workdir / "exit-status"
    term = Terminal(server=f"klaw-test-{uuid.uuid4().hex[:12]}", target="chat", env=env, status_file=status_file)
    wrapped = f"{shlex.join(command)}; echo $? > {shlex.quote(str(status_file))}"
    await term.tmux("-f", str(config), "new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", wrapped)
    try:
        yield term
    finally:
        await term.tmux("kill-server")


@needs_tmux
async def test_klaw_chat_in_a_terminal_answers_runs_commands_and_exits_cleanly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
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
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("a slow question")
            async with asyncio.timeout(DEADLINE_SECONDS):
                await started.wait()
            yield Thinking(home, term, release)
    assert not (home / "engine.sock").exists()  # shut down, not killed


@needs_tmux
async def test_ctrl_c_while_the_model_thinks_says_it_is_stopping_and_still_shows_the_reply(tmp_path: Path) -> None:
    """Ctrl-C mid-turn stops the chat gracefully: the turn finishes, its answer is shown, then exit."""
    async with model_thinking(tmp_path) as chat:
        await chat.term.tmux("send-keys", "-t", chat.term.target, "C-c")
        await chat.term.wait_for(lambda s: "stopping: finishing the reply in flight" in s, "the stopping notice")
        chat.release.set()
        assert await chat.term.exit_status() == 130  # interrupted, as after any Ctrl-C
        screen = await chat.term.screen()
        assert "the late answer" in screen, [p.read_text() for p in chat.home.rglob("*.jsonl")]
        assert screen.index("the late answer") > screen.index("stopping: finishing the reply")
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


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def chat_without_a_terminal(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`klaw chat` with nothing on stdin, for a refusal that comes before any prompt (the model check)."""
    return subprocess.run(
        [sys.executable, "-m", "klaw", "chat"],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


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
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
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
