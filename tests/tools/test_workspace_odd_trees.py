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


@needs_sandbox
async def test_a_setuid_program_past_the_tracked_entries_and_depth_is_still_found(tmp_path: Path) -> None:
    """Decision 536: the walk after a run, which takes the bits off, is also the quota's count; it goes
    everywhere, past the 20,000 entries and 64 folders the run's file list tracks."""
    code = (
        "import os, shutil\nfor n in range(20_001):\n    open(f'f{n}', 'w').close()\n"
        "os.makedirs('/'.join(['d'] * 70))\nshutil.copy('/usr/bin/id', '/'.join(['d'] * 70) + '/sid')\n"
        "os.chmod('/'.join(['d'] * 70) + '/sid', 0o4755)\nprint('hidden')\n"
    )
    async with sandboxed_engine(tmp_path) as h:
        content = await code_turn(h, "hide", "python", code, "hid")
        assert content.startswith("exit code 0") and "stdout:\nhidden" in content, content
        assert "workspace files: not tracked (more than 20,000 files and folders)" in content, content
        assert f"setuid/setgid bits taken off (klaw keeps none in the workspace): {'d/' * 70}sid" in content
        hidden = h.home.workspace.joinpath(*["d"] * 70, "sid")
        assert not hidden.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
        assert "over the bounds" not in content  # the count after the run, from the same walk: within the quota


def test_a_folder_the_walk_after_a_run_cannot_enter_is_named(tmp_path: Path) -> None:
    """What code_execute's result says of a folder klaw cannot look into after a run (made by code as the
    person's own user: `chmod 000 locked`): no setuid file there was looked for (decision 536). Root enters
    every folder, so the walk runs in a child process that became `nobody` (root is needed to become it)."""
    import json
    import shutil

    import pytest

    from klaw.tools.sandbox.workspace_changes import compare, snapshot

    if os.geteuid() != 0:
        pytest.skip("the walk runs as nobody, which only root can become")
    place = Path("/tmp") / f"klaw-unlooked-{os.getpid()}"
    place.mkdir(mode=0o755)
    os.chown(place, 65534, 65534)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # the child: nobody, a workspace whose code locked a folder holding a setuid file
        try:
            os.close(reading)
            os.setgid(65534)
            os.setuid(65534)
            before = snapshot(place)
            (place / "locked").mkdir()
            (place / "locked" / "sid").write_text("x")
            os.chmod(place / "locked" / "sid", 0o4755)
            os.chmod(place / "locked", 0)
            os.write(writing, json.dumps(compare(before, snapshot(place, clear_setid=True)).lines()).encode())
        finally:
            os._exit(0)
    os.close(writing)
    try:
        with os.fdopen(reading, "rb") as said:
            lines = json.loads(said.read() or b"null")
        os.waitpid(child, 0)
        assert lines is not None, "the child said nothing"
        assert (
            "klaw could not look into locked (no permission to list it): a setuid or setgid file there was not"
            " looked for (klaw keeps none in the workspace): make it readable (chmod 700) or delete it"
        ) in lines, lines
    finally:
        for folder, _, _ in os.walk(place):
            os.chmod(folder, 0o700)
        shutil.rmtree(place)
