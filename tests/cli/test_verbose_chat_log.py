"""`klaw -v chat` wrote every DEBUG line (httpcore's traces) into KLAW_HOME/logs/chat.log, while `-v`'s help
says "to stderr" and the README says chat.log holds warnings (newcomer20, decision 489). The debug lines go to
the screen only; the file keeps warnings and errors, with or without -v."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import CHAT_SECONDS


async def test_verbose_chat_shows_debug_on_stderr_and_keeps_it_out_of_chat_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    log = home / "logs" / "chat.log"
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "klaw", "-v", "chat", stdin=-1, stdout=-1, stderr=-1, env=env
        )
        out, err = await asyncio.wait_for(process.communicate(b"hello there\n"), timeout=CHAT_SECONDS)
        assert process.returncode == 0 and out.decode() == "echo: hello there\n", err.decode()
        assert "DEBUG httpcore" in err.decode()  # -v shows them
        # a warning still reaches the file: a skill that cannot be read, logged at the chat's start
        broken = home / "workspace" / "skills" / "bad"
        broken.mkdir(parents=True)
        (broken / "SKILL.md").write_text("no front matter here\n")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "klaw", "-v", "chat", stdin=-1, stdout=-1, stderr=-1, env=env
        )
        await asyncio.wait_for(process.communicate(b"hello again\n"), timeout=CHAT_SECONDS)
    written = log.read_text(encoding="utf-8")
    assert " DEBUG " not in written and " INFO " not in written, written[:2000]
    assert "WARNING" in written and "bad/SKILL.md" in written, written[:2000]
