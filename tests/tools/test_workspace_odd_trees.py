"""What code can leave in the workspace that the run's file list and the host must survive (adversary31,
decision 524): a folder 1,100 levels deep broke every later code_execute with RecursionError (os.walk) and
lost the run's output; a link to a folder was missing from "files created"; code run as root made a
setuid-root program that stayed setuid on the host."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.deep_chain import remove_chain
from tests.tools.workspace_turns import code_turn, needs_sandbox, sandboxed_engine

DEEP = "import os\nfor _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nopen('bottom.txt', 'w').close()\n"
DEEP += "print('made it')\n"


@needs_sandbox
async def test_a_folder_1100_deep_keeps_the_output_and_later_runs_work(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path) as h:
        try:
            content = await code_turn(h, "dig deep", "python", DEEP, "dug")
            assert content.startswith("exit code 0") and "stdout:\nmade it" in content, content
            assert "RecursionError" not in content
            assert "files more than 64 folders deep in the workspace are not tracked" in content
            later = await code_turn(h, "say hello", "shell", "echo hello > hi.txt; echo hello", "said")
            assert later.startswith("exit code 0") and "stdout:\nhello" in later, later
            assert "files created: hi.txt" in later
        finally:
            remove_chain(h.home.workspace)  # pytest's own clean-up would recurse through it


@needs_sandbox
async def test_a_link_to_a_folder_is_listed_as_a_link(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path) as h:
        content = await code_turn(h, "link", "shell", "ln -s / rootlink && ln -s hi.txt filelink", "linked")
        assert "files created: filelink -> hi.txt, rootlink -> /" in content, content
        assert os.readlink(h.home.workspace / "rootlink") == "/"


@needs_sandbox
async def test_code_cannot_leave_a_setuid_program_on_the_host(tmp_path: Path) -> None:
    code = (
        "cp /usr/bin/id sid && chmod 4755 sid && mkdir -p deep && cp sid deep/gid && chmod 2755 deep/gid"
        " && grep ' /workspace ' /proc/self/mountinfo"
    )
    async with sandboxed_engine(tmp_path) as h:
        content = await code_turn(h, "setuid", "shell", code, "made")
        assert content.startswith("exit code 0"), content
        mount = next(line for line in content.splitlines() if " /workspace " in line)
        assert "nosuid" in mount and "nodev" in mount  # bwrap's bind: no setuid program runs as such inside
        assert "setuid/setgid bits taken off (klaw keeps none in the workspace): deep/gid, sid" in content
        for name in ("sid", "deep/gid"):
            mode = (h.home.workspace / name).stat().st_mode
            assert not mode & (stat.S_ISUID | stat.S_ISGID) and stat.S_IMODE(mode) == 0o755, oct(mode)
