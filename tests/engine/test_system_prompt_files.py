"""The system prompt's files read beneath the workspace: a prompt file that code run by `code_execute`
replaced with a symlink leading outside (the web token) is left out of every prompt, with a warning
naming the file, never its content (decision 243)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw
from klaw.engine.system_prompt import MAX_PROMPT_FILE_BYTES, SystemPrompt
from tests.test_library import CONFIG

SECRET = "the web token of KLAW_HOME"


def test_a_prompt_file_linked_outside_stays_out_of_the_system_prompt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "home-outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "web_token").write_text(SECRET, encoding="utf-8")
    (workspace / "SOUL.md").write_text("# Soul\nkind\n", encoding="utf-8")
    (workspace / "notes").mkdir()
    (workspace / "notes" / "me.md").write_text("# Identity\nNova\n", encoding="utf-8")
    (workspace / "IDENTITY.md").symlink_to("notes/me.md")  # a link inside is read as before
    (workspace / "AGENTS.md").symlink_to(outside / "web_token")  # as code_execute could leave it
    text = SystemPrompt(workspace).text_now()
    assert text == "# Soul\nkind\n\n# Identity\nNova"
    assert SECRET not in caplog.text and "AGENTS.md leads outside the workspace" in caplog.text


async def test_a_huge_prompt_file_is_cut_at_its_cap_and_a_fifo_left_out_both_said(tmp_path: Path) -> None:
    """A person's log pasted into AGENTS.md went whole into every prompt; a FIFO as SOUL.md was read, waiting
    for a writer. Now AGENTS.md gives its first 64 KiB and a line saying the rest is left out, the FIFO
    nothing, and `/status` names both (decision 460). Through the library API."""
    home = tmp_path / "home"
    seen: list[str] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        seen.append(messages[0].content or "")
        return "ok"

    async with Klaw(home, config=CONFIG, model=FunctionModel(model)) as agent:
        workspace = home / "workspace"
        (workspace / "AGENTS.md").write_text(
            "# Rules\nBe brief and kind.\n" + "é log line\n" * 30_000, encoding="utf-8"
        )
        (workspace / "SOUL.md").unlink()
        os.mkfifo(workspace / "SOUL.md")
        assert await agent.ask("alice", "hello") == "ok"
        status = await agent.ask("alice", "/status")
    [prompt] = seen  # the cap falls inside an "é": the half of it is not decoded (nor a turn failed on it)
    assert prompt.startswith("# Identity") and "# Rules\nBe brief and kind." in prompt, prompt[:200]
    assert len(prompt.encode()) < MAX_PROMPT_FILE_BYTES + 2048
    assert (
        "[klaw: the rest of AGENTS.md (360,027 bytes in all) is left out: a prompt file is read up to 64 KiB]" in prompt
    )
    assert "Prompt file AGENTS.md is 360,027 bytes: only its first 64 KiB go into each prompt; shorten it" in status
    assert (
        "Prompt file SOUL.md cannot be read (not a regular file but a FIFO (named pipe)); it is left out of the prompt:"
        " put a file there or remove it" in status
    ), status
