"""What code in the real sandbox sees of the prompt files and skills/, now private copies (decision 283):
the content, an executable skill script that still runs, a symlink inside a skill that still leads
inside, one leading out of the workspace that leads nowhere, nothing written through; the copies gone
after the run; a skills folder too large to copy refused with what to do."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.registry import ToolRegistry
from klaw.tools.sandbox import read_only_copies
from klaw.tools.sandbox.tool import register_code_execute
from klaw.tools.schema import ToolContext
from tests.tools.sandbox_helpers import backend_or_skip, home_with_secrets

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")

SHOW = """cat SOUL.md; echo
./skills/s/run.sh
cat skills/alias/SKILL.md; echo
cat skills/out 2>&1 | head -c 200; echo
echo changed >> SOUL.md || echo REFUSED-SOUL
echo changed >> skills/s/SKILL.md || echo REFUSED-SKILL
"""


async def run_shell(home: KlawHome, code: str) -> str:
    backend, sandbox = backend_or_skip(home, backend="bubblewrap")
    registry = ToolRegistry(timeout_seconds=60)
    register_code_execute(registry, backend, sandbox, read_only=("SOUL.md", "skills/"))
    call = ToolCall("c1", "code_execute", json.dumps({"language": "shell", "code": code}))
    return (await registry.execute(call, ToolContext(ChatRef("console", "me"), home.workspace))).content


async def test_code_sees_copies_that_behave_like_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))  # where the copies go: seen empty afterwards
    home = home_with_secrets(tmp_path)
    workspace = home.workspace
    (workspace / "SOUL.md").write_text("the soul", encoding="utf-8")
    skill = workspace / "skills" / "s"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("the skill", encoding="utf-8")
    (skill / "run.sh").write_text("#!/bin/sh\necho RAN-THE-SCRIPT\n", encoding="utf-8")
    (skill / "run.sh").chmod(0o700)
    (workspace / "skills" / "alias").symlink_to("s")
    (workspace / "skills" / "out").symlink_to(Path("..") / ".." / home.web_token_file.name)

    answer = await run_shell(home, SHOW)

    assert "the soul" in answer and "RAN-THE-SCRIPT" in answer, answer
    assert answer.count("the skill") == 1, answer  # through the symlink inside the skills folder
    assert "secret-web-token" not in answer and "No such file" in answer, answer
    assert "REFUSED-SOUL" in answer and "REFUSED-SKILL" in answer, answer
    assert (workspace / "SOUL.md").read_text(encoding="utf-8") == "the soul"
    assert (skill / "SKILL.md").read_text(encoding="utf-8") == "the skill"
    assert list(staging.iterdir()) == []


async def test_a_skills_folder_too_large_to_copy_is_refused_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_only_copies, "MAX_ENTRIES", 3)
    home = home_with_secrets(tmp_path)
    skills = home.workspace / "skills"
    skills.mkdir()
    for n in range(4):
        (skills / f"skill{n}.md").write_text("x", encoding="utf-8")

    answer = await run_shell(home, "echo RAN")

    assert "RAN" not in answer
    assert "the code did not run: skills/ is copied read-only into each run" in answer, answer
    assert "more than 3 entries" in answer and "move large files out of it" in answer, answer
