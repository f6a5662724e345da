"""The system prompt's files read beneath the workspace: a prompt file that code run by `code_execute`
replaced with a symlink leading outside (the web token) is left out of every prompt, with a warning
naming the file, never its content (decision 243)."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.engine.system_prompt import SystemPrompt

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
