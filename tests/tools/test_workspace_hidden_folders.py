"""Folders the quota's walk could not look into (adversary13): a path longer than PATH_MAX, and a folder
without read permission when klaw runs as an ordinary user. The walk went round them in silence, so a run
writing beneath them passed every bound; now each folder is entered by its descriptor (no path length
applies) and one that still cannot be entered is named and counts as over the bounds (decision 370). A tree
of any depth is counted (decision 440: the walk holds one folder open, not one per level)."""

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
from tests.tools.workspace_turns import code_turn, needs_sandbox, sandboxed_engine

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
                      "shrink": room.refusal(-10, 0), "may_add": room.may_add}))
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
    assert seen["may_add"] == 0  # no file of a run may grow: what the folder holds may be the whole quota (adversary23)


# A blob 210 folders deep in a folder of its own (adversary23's quota_deep_folder.py): the walk once held every
# level open and named a tree past 200 levels "too deep", counting none of it, so every run had the whole quota
# again (116 MiB after 8 runs against 20 MiB).
DEEP_BLOB = """
import os
path = os.path.join("run{n}", *["a"] * 210)
os.makedirs(path)
with open(os.path.join(path, "blob"), "wb") as f:
    f.write(bytes(6 * 1024 * 1024))
print("wrote it")
"""


def test_a_tree_deeper_than_any_walk_held_open_is_counted_whole(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(250):  # a chain, and beside each level a second folder holding a file: a comb
        os.mkdir("side", dir_fd=fd)
        os.close(os.open("side/f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.mkdir("a", dir_fd=fd)
        inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    assert usage(tmp_path)[1:] == (750, ())
    assert names(tmp_path) == (750, ())


@needs_sandbox
async def test_runs_writing_deeper_than_200_folders_stay_within_the_quota(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path, workspaceQuotaMb=8) as h:
        first = await code_turn(h, "write deep down", "python", DEEP_BLOB.format(n=1), "written")
        assert first.startswith("exit code 0") and "wrote it" in first and "over the bounds" not in first
        second = await code_turn(h, "and again", "python", DEEP_BLOB.format(n=2), "no room")
        assert "File too large" in second and "wrote it" not in second, second
        held = usage(h.home.workspace)
        assert held.unreadable == () and held.bytes <= 9 * 1024 * 1024  # the quota, and the run's own folders
