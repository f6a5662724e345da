"""`klaw chat` given input it cannot send: one line on stderr saying what is wrong and what to do, exit 2,
nothing sent to the model or stored. Before: bytes that are not UTF-8 ended in a 60-line traceback
from the log's write, a 1 MB message went to the model whole, empty input drew a banner and blank
prompts and exited 0, and a running engine was met with only "stop it" (now it answers: decision 430). Decision 240."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped, piped_bytes, refused


def logged_text(home: Path) -> str:
    """Everything the chat logs hold (empty when no message was stored)."""
    logs = (home / "conversations").rglob("*.jsonl") if (home / "conversations").exists() else []
    return "".join(path.read_text(encoding="utf-8") for path in logs)


async def test_piped_input_that_cannot_be_a_message_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        # Side by side: each is a process of its own, refused before its engine starts.
        not_utf8, too_long, empty, blank = await asyncio.gather(
            # Bytes that are not UTF-8. In Python's UTF-8 mode (the C locale's default) stdin made lone
            # surrogates of them, and the log's write failed with a traceback.
            piped_bytes({**env, "PYTHONUTF8": "1"}, b"hello \xe5\x80 world\xff"),
            # Longer than the web page's limit, every channel's now: the size and the limit, nothing sent.
            piped_bytes(env, b"word " * 200_000),
            # Empty and whitespace-only input: nothing to send (before: banner, blank prompts, exit 0).
            piped_bytes(env, None),
            piped_bytes(env, b"  \n\t\n"),
        )
        line = refused(*not_utf8)
        assert "the input is not UTF-8 text (byte 0xe5 at offset 6 is not valid UTF-8)" in line
        assert "iconv" in line
        assert "999,999 characters, more than the 100,000 a message may hold" in refused(*too_long)
        assert "nothing to send: the input is empty" in refused(*empty)
        assert "nothing to send: the input is empty" in refused(*blank)
        assert model.chat_requests == []
        assert "word word" not in logged_text(home) and "hello" not in logged_text(home)


async def test_a_piped_reply_is_alone_on_stdout_even_when_klaw_logs_a_warning(tmp_path: Path) -> None:
    """A turn that logs a warning (a prompt file leading outside the workspace): the line pointing at chat.log
    went to stdout, into `klaw chat > reply.txt`. (It was a message over the context budget; that is said in the
    chat now, on stderr, and logged to the file only: decision 473.)"""
    home = tmp_path / "home"
    init_home(home)
    (home / "workspace" / "AGENTS.md").unlink()
    (home / "workspace" / "AGENTS.md").symlink_to(home / "engine.yaml")
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_text("That is a long one.")
        code, out, err = await piped(env, "many words " * 4_000)
        assert (code, out) == (0, "That is a long one.\n"), err
        assert "(klaw logged a warning: see" in err and "chat.log" in err
        assert "This message is ~11.0k tokens, over the 7.2k-token budget" in err


async def test_klaw_chat_beside_a_bare_running_engine_is_answered_through_it(tmp_path: Path) -> None:
    """Beside `klaw engine` alone (no gateway, no web page), a piped `klaw chat` was refused with where to talk
    to it (decision 259); now it is a client of that engine (decision 430): its reply alone on stdout, the
    model asked once, by the running engine."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("answered by the running engine")
        env = chat_env(home, model.base_url)
        engine = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "klaw", "engine", env=env, stderr=asyncio.subprocess.PIPE
        )
        try:
            assert engine.stderr is not None
            started = await asyncio.wait_for(engine.stderr.readline(), timeout=60)
            assert b"listening on" in started, started
            code, out, err = await piped_bytes(env, b"hello\n")
            assert (code, out) == (0, "answered by the running engine\n"), err
            assert "Traceback" not in err
            assert len(model.chat_requests) == 1
        finally:
            os.kill(engine.pid, signal.SIGTERM)
            await asyncio.wait_for(engine.wait(), timeout=60)
