"""docs/scheduled-tasks.md's command-line block, typed in order on a fresh home (`klaw init`), runs: each
command succeeds. Before, 3 of its 5 failed (a chat with no messages, a model the home does not have, and
so removing the task that was never added)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here

PAGE = Path(__file__).parents[2] / "docs" / "scheduled-tasks.md"


def test_the_pages_schedule_commands_run_in_order_on_a_fresh_home(tmp_path: Path) -> None:
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    block = next(b for b in blocks if "klaw schedule add" in b)
    home = tmp_path / "home"
    init_home(home)
    for line in block.splitlines():
        argv = shlex.split(line)
        assert argv[0] == "klaw", line
        result = klaw_here(home, *argv[1:])
        assert result.returncode == 0, f"{line}\n{result.stdout}{result.stderr}"
    listed = klaw_here(home, "schedule", "list").stdout
    assert "morning" in listed and "cleanup" in listed and "feed" not in listed
