"""Folders the quota's walk could not look into (adversary13): a path longer than PATH_MAX, and a folder
without read permission when klaw runs as an ordinary user. The walk went round them in silence, so a run
writing beneath them passed every bound; now each folder is entered by its descriptor (no path length
applies) and one that still cannot be entered is named and counts as over the bounds (decision 370)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import klaw
from klaw.tools.disk_room import names, usage
from tests.tools.workspace_turns import code_turn, needs_sandbox, sandboxed_engine, tool_turn

LONG = 250  # 20 folders of 252-character names: a path of over 5,000 characters, past PATH_MAX (4,096)

DEEP_FILES = f"""
import os, time
for i in range(20):
    name = "%02d" % i + "d" * {LONG}
    os.makedirs(name, exist_ok=True)
    os.chdir(name)
for n in range(5000):
    open(f"f{{n}}", "w").close()
    if n % 100 == 0:
        time.sleep(0.02)
print("all made")
"""


def _deep(workspace: Path, files: int) -> Path:
    """20 folders of long names under `workspace`, `files` empty files at the bottom; its relative path."""
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(20):
            name = f"{i:02d}" + "d" * LONG
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        for n in range(files):
            os.close(os.open(f"f{n}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    return workspace


def test_a_tree_deeper_than_path_max_is_counted_whole(tmp_path: Path) -> None:
    _deep(tmp_path, 200)
    assert usage(tmp_path)[1:] == (220, ())  # 20 folders and 200 files: before, only what PATH_MAX let through
    assert names(tmp_path) == (220, ())


@needs_sandbox
async def test_code_making_files_beneath_a_path_longer_than_path_max_is_stopped(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path, workspaceQuotaFiles=300) as h:
        content = await code_turn(h, "make files deep down", "python", DEEP_FILES, "too many")
        assert content.startswith("stopped: the workspace passed its limit of 300 files and folders")
        assert "all made" not in content


# Run as nobody (klaw's usual case is an ordinary user, whom a chmod 000 folder keeps out): a folder with
# files in it, closed, then measured; prints what the walk and the room say. Its own folder, removed after.
AS_NOBODY = """
import json, os, shutil, sys, tempfile
from pathlib import Path
from klaw.tools.disk_room import DiskRoom, names, usage
ws = Path(tempfile.mkdtemp(prefix="klaw-hidden-"))
try:
    (ws / "hid").mkdir()
    for n in range(50):
        (ws / "hid" / f"f{n}").write_bytes(b"x" * 5000)
    os.chmod(ws / "hid", 0)
    room = DiskRoom(quota_bytes=1 << 30, floor_bytes=0, quota_files=1000).measure(ws)
    print(json.dumps({"usage": usage(ws), "names": names(ws), "over": room.over(), "write": room.refusal(10, 1),
                      "shrink": room.refusal(-10, 0)}))
finally:
    os.chmod(ws / "hid", 0o700)
    shutil.rmtree(ws)
"""


def test_a_folder_an_ordinary_user_cannot_list_is_named_and_over_the_bounds() -> None:
    source = str(Path(klaw.__file__).parent.parent)
    as_user: list[str] = []
    if os.geteuid() == 0:  # root reads a chmod 000 folder: become nobody, as klaw usually runs unprivileged
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot become an ordinary user")
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run(
        [*as_user, sys.executable, "-c", AS_NOBODY],
        env={"PYTHONPATH": source, "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["usage"][1:] == [1, ["hid (no permission to list it)"]]
    assert seen["names"] == [1, ["hid (no permission to list it)"]]
    assert seen["over"].startswith("klaw cannot look into hid (no permission to list it) in the workspace")
    assert "chmod -R u+rwx" in seen["over"] and seen["write"] == seen["over"]
    assert seen["shrink"] is None  # a write freeing room is never refused: one way back


@needs_sandbox
async def test_a_tree_too_deep_to_walk_is_named_over_the_bounds_until_the_run_removes_it(tmp_path: Path) -> None:
    deep = "/".join(["d"] * 205)  # the walk holds 200 folders open at most
    async with sandboxed_engine(tmp_path) as h:
        content = await code_turn(h, "make a deep tree", "shell", f"mkdir -p {deep}; : > {deep}/x", "made")
        assert "over the bounds: klaw cannot look into d/d/" in content and "(more than 200 folders deep)" in content
        content = await tool_turn(h, "save a note", [("file_write", {"path": "note.txt", "content": "hi"})], "refused")
        assert content.startswith("'note.txt' was not written: klaw cannot look into d/d/")
        assert "Make it readable (code_execute: chmod -R u+rwx on it) or delete it" in content
        content = await code_turn(h, "remove it", "shell", "rm -r d; echo gone", "removed")
        assert content.startswith("exit code 0") and "over the bounds" not in content
