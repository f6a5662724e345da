"""adversary30 (decision 515): `tools.approval: [file_write]` does not hold what code run by code_execute
writes in the workspace. A person holding file_write expects every write held, so `klaw config check` and
the engine's start log warn, naming both tools and the fix; held too, or code not offered, nothing is said."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.cli.klaw_here import klaw_here
from tests.engine.harness import running_engine
from tests.tools.sandbox_helpers import no_sandbox_reason

pytestmark = pytest.mark.skipif(no_sandbox_reason() is not None, reason=f"no sandbox here: {no_sandbox_reason()}")
SAID = (
    "warning: tools.approval holds file_write, but code_execute is offered without asking you, and code it runs"
    " can create, change and delete any file in the workspace"
)


def test_config_check_warns_when_file_write_is_held_and_code_execute_is_not(tmp_path: Path) -> None:
    (tmp_path / "engine.yaml").write_text("tools:\n  approval: [host_exec, file_write]\n", "utf-8")
    result = klaw_here(tmp_path, "config", "check")
    assert result.returncode == 0, result.stderr  # valid: it may be meant
    said = " ".join(result.stderr.split())
    assert SAID in said, said
    assert "Add code_execute to tools.approval" in said and "or take code out of tools.enabled" in said
    for quiet in ("[host_exec, file_write, code_execute]", "[host_exec]"):
        (tmp_path / "engine.yaml").write_text(f"tools:\n  approval: {quiet}\n", "utf-8")
        result = klaw_here(tmp_path, "config", "check")
        assert result.returncode == 0 and "code_execute is offered" not in result.stderr, result.stderr
    not_offered = "tools:\n  enabled: [clock, files]\n  approval: [file_write]\n"
    (tmp_path / "engine.yaml").write_text(not_offered, "utf-8")
    result = klaw_here(tmp_path, "config", "check")
    assert result.returncode == 0 and "code_execute is offered" not in result.stderr, result.stderr


async def test_the_engines_start_log_says_it_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="klaw.engine.assembly")
    async with running_engine(tmp_path, tools={"approval": ["file_write"]}):
        pass
    said = [r.getMessage() for r in caplog.records if "code_execute is offered" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(SAID.removeprefix("warning: ")), said
