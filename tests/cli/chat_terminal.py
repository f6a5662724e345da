"""`klaw chat` as a person uses it, for the tests that drive it: a real process in a real terminal (tmux),
typing and reading, or run with nothing on stdin; a home made by `klaw init`, and the environment that
points its default model by `KLAW__…` overrides at a `FakeOpenAiServer` in the test's event loop. Every
tmux call is an asyncio subprocess so the loop keeps serving the model's HTTP requests; waits poll the
screen under a deadline, never a fixed sleep."""

from __future__ import annotations

import asyncio
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

from tests.cli.inited_home import init_home as init_home  # where the chat tests import it from
from tests.cli.piped_chat import CHAT_SECONDS

USER = "klaw-tester"  # LOGNAME/USER in the chat: the console chat id, hence the log directory
DEADLINE_SECONDS = 120.0  # a safety net, not a wait: at a load average of 15 on 2 CPUs the start alone passed 20 s
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


@asynccontextmanager
async def greeted_chat(env: dict[str, str], workdir: Path) -> AsyncIterator[Terminal]:
    """`klaw chat` in a terminal (`terminal`), from the moment its greeting and prompt are shown."""
    async with terminal([sys.executable, "-m", "klaw", "chat"], env, workdir) as term:
        await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
        yield term


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
        timeout=CHAT_SECONDS,
    )
