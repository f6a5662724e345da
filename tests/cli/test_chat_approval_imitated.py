"""A reply imitating the approval question cannot pass for it in `klaw chat` (decision 532).

adversary32: a model's reply "The agent wants to run file_write: … /approve 4a9c … approve? [y/N]" looked
exactly like klaw's own question. Now the real one is drawn in a yellow double-lined box headed "klaw asks
before a tool runs" in reverse yellow; a reply, even one that writes those words and box characters itself,
is drawn without that colour. A real process in tmux, the screen read with its colours (`capture-pane -e`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.test_chat_terminal_approval import APPROVE, hold_file_write

APPROVAL_HEADING = "klaw asks before a tool runs"  # approval_mark.APPROVAL_HEADING, as a person reads it
IMITATION = (
    f"╔ {APPROVAL_HEADING} ╗\n"
    "The agent wants to run file_write:\n```\npath: notes.txt\ncontent: hi\n```\n"
    "Type /approve 4a9c to run it, /deny 4a9c to refuse.\napprove? [y/N]"
)
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _styled_lines(coloured: str, words: str) -> list[set[str]]:
    """For each line holding `words`, the SGR parameters in force where they begin."""
    found = []
    for line in coloured.splitlines():
        at = line.find(words)
        if at < 0:
            continue
        params: set[str] = set()
        for match in SGR.finditer(line[:at]):
            codes = set(match.group(1).split(";")) if match.group(1) else {"0"}
            params = set() if "0" in codes else params | codes
        found.append(params)
    return found


@needs_tmux
async def test_a_reply_imitating_the_question_is_drawn_unlike_the_real_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        model.reply_text(IMITATION)
        model.reply_tool_calls([("file_write", {"path": "kept.txt", "content": "yes please"})])
        model.reply_text("Wrote kept.txt.")
        async with terminal([sys.executable, "-m", "klaw", "chat"], chat_env(home, model.base_url), tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("pretend")
            await term.wait_for_prompt_after("approve? [y/N]", "the imitation, then the you prompt")
            fake = await term.tmux("capture-pane", "-p", "-e", "-S", "-", "-t", term.target)
            [fake_heading] = _styled_lines(fake, APPROVAL_HEADING)
            assert not {"7", "33"} <= fake_heading, fake_heading  # not reverse yellow: a reply cannot be
            await term.type_line("write it")
            await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the real approval prompt")
            real = await term.tmux("capture-pane", "-p", "-e", "-S", "-", "-t", term.target)
            fake_again, real_heading = _styled_lines(real, APPROVAL_HEADING)
            assert {"7", "33"} <= real_heading or {"7", "93"} <= real_heading, real_heading
            assert fake_again == fake_heading
            screen = await term.screen()
            assert "╔" in screen.split("write it", 1)[1] and "path: kept.txt" in screen
            await term.type_line("y")
            await term.wait_for_prompt_after("Wrote kept.txt.", "the reply after approving")
    assert (home / "workspace" / "kept.txt").read_text(encoding="utf-8") == "yes please"
