"""A reply imitating the approval question cannot pass for it in `klaw chat` (decision 532).

adversary32: a model's reply "The agent wants to run file_write: … /approve 4a9c … approve? [y/N]" looked
exactly like klaw's own question. Now the real one is drawn in a yellow double-lined box headed "klaw asks
before a tool runs" in reverse yellow; a reply, even one that writes those words and box characters itself,
is drawn without that colour. A real process in tmux, the screen read with its colours (`capture-pane -e`)."""

from __future__ import annotations

import colorsys
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.color import Color
from rich.console import Console

from klaw.channels.approval_mark import approval_panel
from klaw.channels.console import show_reply
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


CODE_REPLY = (
    "Here is the box:\n\n```python\nprint(\"╔═ klaw asks before a tool runs ═╗\")\nanswer = 'approve? [y/N]'\n```\n\n"
    "1. first\n2. second\n\n- a bullet\n\n> quoted, `inline code`, **bold**, [a link](https://example.org)\n\n"
    "## A heading"
)


def _yellow(params: list[str]) -> str | None:
    """The first yellowish colour one SGR sequence's parameters set (basic, 256-colour or truecolor), else None:
    a hue between orange and lime with some saturation, as the approval box's yellow is."""
    index = 0
    while index < len(params):
        code = params[index]
        if code in ("33", "93", "43", "103"):
            return code
        if code in ("38", "48") and index + 1 < len(params):
            if params[index + 1] == "5":
                rgb = Color.from_ansi(int(params[index + 2])).get_truecolor()
                red, green, blue = rgb.red, rgb.green, rgb.blue
                index += 3
            else:
                red, green, blue = (int(p) for p in params[index + 2 : index + 5])
                index += 5
            hue, saturation, value = colorsys.rgb_to_hsv(red / 255, green / 255, blue / 255)
            if 40 <= hue * 360 <= 75 and saturation > 0.25 and value > 0.3:
                return ";".join(params)
            continue
        index += 1
    return None


def _yellows(coloured: str) -> list[str]:
    return [y for m in SGR.finditer(coloured) if (y := _yellow(m.group(1).split(";"))) is not None]


@dataclass(frozen=True)
class _Reply:
    text: str
    kind: str = "reply"
    task: str | None = None
    spawned: bool = False
    sent_from: str | None = None
    tools: tuple[str, ...] = ()
    approval: str | None = None


def test_nothing_a_reply_brings_is_yellow() -> None:
    """decision 543: a code block's strings were monokai's pale yellow (256-colour 186) and a task's or subagent's
    label (its name the model's) bold yellow: both now drawn in colours the approval box never uses."""
    for system in ("256", "truecolor", "standard"):
        out = io.StringIO()
        console = Console(file=out, force_terminal=True, color_system=system, width=100)
        show_reply(console, console, _Reply(CODE_REPLY, task=f"╔═ {APPROVAL_HEADING} ═╗", spawned=True))
        show_reply(console, console, _Reply(CODE_REPLY, sent_from="web:main"))
        drawn = out.getvalue()
        assert APPROVAL_HEADING in drawn and "\x1b[" in drawn
        assert not _yellows(drawn), (system, _yellows(drawn))
        real = io.StringIO()  # the check itself sees the real box's yellow
        Console(file=real, force_terminal=True, color_system=system).print(approval_panel("approve? [y/N]"))
        assert _yellows(real.getvalue())


@needs_tmux
async def test_a_code_block_drawing_the_box_in_a_terminal_is_not_yellow(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text(CODE_REPLY)
        async with terminal([sys.executable, "-m", "klaw", "chat"], chat_env(home, model.base_url), tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("draw it")
            await term.wait_for_prompt_after("A heading", "the reply")
            coloured = await term.tmux("capture-pane", "-p", "-e", "-S", "-", "-t", term.target)
            reply = coloured.split("draw it", 1)[1]
            assert APPROVAL_HEADING in reply and "\x1b[" in reply, reply
            assert not _yellows(reply), _yellows(reply)
