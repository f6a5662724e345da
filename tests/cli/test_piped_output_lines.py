"""Commands whose output goes to a pipe or a file print whole lines, unpadded: rich laid them out for an
80-column terminal, so `klaw memory search X | cat -A` broke lines mid-sentence and ended them with spaces."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer, TextReply
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.cli.test_memory_search import DEPLOY, fill
from tests.memory.recall_helpers import DIM

SUBAGENT_ANSWER = (
    "Here are three sources on the history of the beagle, each with a short note on what it covers and why"
    " it is worth reading first."
)


def piped_klaw(home: Path, *args: str) -> str:
    """`klaw ARGS | cat`: its stdout, a pipe (no COLUMNS: as a script runs it)."""
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"} and not k.startswith("KLAW")}
    result = subprocess.run(
        [sys.executable, "-m", "klaw", *args],
        capture_output=True,
        text=True,
        env={**env, "KLAW_HOME": str(home)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def unpadded(out: str) -> list[str]:
    lines = out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == [], out  # no trailing spaces
    return lines


def test_init_and_memory_search_print_whole_unpadded_lines(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    lines = unpadded(piped_klaw(home.root, "init"))
    assert any(line.endswith("(one folder per skill, with a SKILL.md: docs/skills.md)") for line in lines), lines
    home.config_file.write_text(f"embedder:\n  backend: fake\n  dim: {DIM}\n", encoding="utf-8")
    fill(home)
    lines = unpadded(piped_klaw(home.root, "memory", "search", "deploy friday", "--segment", "all"))
    assert f"   {DEPLOY}" in lines
    # Into a pipe nothing is dimmed: the legend names the mark the lines carry instead (decision 490).
    caption = [line for line in lines if "marked [beyond threshold]: found by vectors alone" in line]
    assert len(caption) == 1 and caption[0].endswith("so a reply can rank for its question's words"), lines
    assert "segment 2 (id 2): 2026-03-01 09:00 UTC (current), 2 message(s)" in unpadded(
        piped_klaw(home.root, "memory", "list")
    )


async def test_a_subagent_answer_in_a_piped_chat_is_printed_as_written(tmp_path: Path) -> None:
    """The turn's reply was printed as the model wrote it, a subagent's answer (shown once the run the
    turn started has ended) wrapped and padded to 80 columns."""
    home = tmp_path / "home"
    init_home(home)

    def answer(body: Any) -> TextReply:
        said = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        return TextReply(SUBAGENT_ANSWER if "find sources" in str(said) else "Started it.")

    async with FakeOpenAiServer(default_reply=answer) as model:
        model.reply_tool_calls([("subagent_spawn", {"task_name": "research", "message": "find sources"})])
        code, out, err = await piped(chat_env(home, model.base_url), "research this for me\n")
    assert code == 0, err
    assert "Started it.\n" in out and f"Subagent: research\n{SUBAGENT_ANSWER}\n" in out, out
    unpadded(out)
