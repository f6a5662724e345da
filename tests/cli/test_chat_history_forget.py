"""The console's input history never keeps what `/forget` erased (a real terminal, tmux).

Only slash commands are written to `KLAW_HOME/chat_history`; messages are recalled (up-arrow) within
the session, until a `/forget` drops them. A history file written by an older klaw, with messages in
it, loses them the first time it is read.
"""

from __future__ import annotations

import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import PROMPT, chat_env, init_home, needs_tmux, terminal

OLD_HISTORY = "\n# 2026-01-01 10:00:00\n+an old secret message\n\n# 2026-01-01 10:00:05\n+/status\n"


@needs_tmux
async def test_forget_erases_the_message_from_the_input_history_on_screen_and_on_disk(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    history = home / "chat_history"
    history.write_text(OLD_HISTORY, encoding="utf-8")
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("my bank pin is quokka")
            await term.wait_for_prompt_after("echo: my bank pin is quokka", "the model's reply")

            await term.tmux("send-keys", "-t", term.target, "Up")  # within the session, up-arrow recalls it
            await term.wait_for(lambda s: s.rstrip().endswith(f"{PROMPT}my bank pin is quokka"), "the recalled message")
            await term.tmux("send-keys", "-t", term.target, "C-u")

            await term.type_line("/forget last")
            await term.wait_for_prompt_after("Forgot exchange", "the /forget reply")
            # Up twice: past "/forget last" straight to the command typed before the message.
            await term.tmux("send-keys", "-t", term.target, "Up", "Up")
            screen = await term.wait_for(lambda s: s.rstrip().endswith(f"{PROMPT}/status"), "the command before it")
            assert screen.count("my bank pin is quokka") == 2  # what was typed and the reply, never recalled
            await term.tmux("send-keys", "-t", term.target, "C-u", "C-d")
            assert await term.exit_status() == 0

    kept = history.read_text(encoding="utf-8")
    assert "quokka" not in kept
    assert "an old secret message" not in kept  # an older klaw's history loses its messages
    assert "+/status" in kept and "+/forget last" in kept
