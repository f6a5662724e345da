"""`klaw backup` and `klaw restore` of a home whose workspace holds what sandboxed code can make (adversary31,
decision 524): a folder 1,100 levels deep (backup failed with an 84-line RecursionError traceback and wrote no
archive), and one whose path is longer than the system reads (named and left out); a backup stopped by
SIGTERM or SIGHUP left its partial archive and database copies behind (Ctrl-C did not)."""

from __future__ import annotations

import io
import os
import re
import signal
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.deep_chain import remove_chain

LONG = "n" * 250


def _chain(folder: Path, name: str, depth: int, last: str) -> None:
    """`depth` folders `name` one in another under `folder`, the deepest holding `bottom.txt` (`last`); made by
    descriptors, so no path length applies (as code doing os.mkdir, os.chdir makes them)."""
    here = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=here)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
            os.close(here)
            here = inner
        with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=here), "w") as bottom:
            bottom.write(last)
    finally:
        os.close(here)


def test_a_home_with_a_1100_deep_folder_is_backed_up_and_restored(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    workspace, restored = home / "workspace", tmp_path / "restored"
    _chain(workspace, "d", 1100, "at the bottom")
    _chain(workspace, LONG, 20, "too far down")  # 5,000 characters: past PATH_MAX (4,096)
    archive = tmp_path / "home.tgz"
    try:
        done = klaw_here(home, "backup", str(archive))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        assert f"Wrote {archive}" in done.stdout
        left_out = next(line for line in done.stdout.splitlines() if line.startswith("Left out: "))
        assert f"workspace/{LONG[:40]}" in left_out and f"{LONG[:40]} (its path is too long to read)" in left_out
        back = klaw_here(home, "restore", str(archive), "--home", str(restored))
        assert back.returncode == 0, back.stdout + back.stderr
        bottom = restored.joinpath("workspace", *["d"] * 1100, "bottom.txt")
        assert bottom.read_text(encoding="utf-8") == "at the bottom"
        assert (restored / "workspace" / LONG).is_dir()  # what could be read of it
    finally:
        for folder in (workspace, restored / "workspace"):
            remove_chain(folder)
            remove_chain(folder, LONG)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGHUP])
def test_a_backup_stopped_by_a_signal_leaves_nothing_behind(tmp_path: Path, signal_number: int) -> None:
    home = a_home(tmp_path)
    with open(home / "workspace" / "noise.bin", "wb") as noise:  # random: slow to compress, time to stop it
        for _ in range(40):
            noise.write(os.urandom(1 << 22))
    backups = tmp_path / "backups"
    backups.mkdir()
    env = {**os.environ, "KLAW_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    backup = subprocess.Popen(
        [sys.executable, "-m", "klaw", "backup", str(backups / "home.tgz")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (backups / ".home.tgz.partial").exists():
        assert backup.poll() is None and time.monotonic() < deadline, backup.communicate()
        time.sleep(0.02)
    backup.send_signal(signal_number)
    out, err = backup.communicate(timeout=60)
    assert backup.returncode != 0, out
    assert "Traceback" not in err
    assert sorted(path.name for path in backups.iterdir()) == []  # no partial archive, no database copies


def test_sparse_files_keep_their_holes_and_setuid_bits_stay_out(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    sparse = home / "workspace" / "sp"
    sparse.mkdir()
    for n in range(4):
        with open(sparse / f"f{n}", "wb") as made:  # `truncate -s 1G`: 4 GB apparent, no blocks
            made.truncate(1 << 30)
    with open(sparse / "middle", "wb") as made:
        made.seek(300 << 20)
        made.write(b"in the middle")
        made.truncate(600 << 20)
    program = home / "workspace" / "sid"
    program.write_bytes(b"#!/bin/sh\nid\n")
    program.chmod(0o4755)
    archive, restored = tmp_path / "home.tgz", tmp_path / "restored"
    done = klaw_here(home, "backup", str(archive))
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0.0 MB before compression" in done.stdout  # the data, not 4.6 GB of holes
    with tarfile.open(archive) as packed:
        assert not packed.getmember("workspace/sid").mode & (stat.S_ISUID | stat.S_ISGID)
        assert packed.getmember("workspace/sp/f0").size == 1 << 30
    back = klaw_here(home, "restore", str(archive), "--home", str(restored))
    assert back.returncode == 0, back.stdout + back.stderr
    assert " 0.0 MB, made " in back.stdout, back.stdout  # the data, as the backup said: not 4,924 MB (528)
    for n in range(4):
        info = (restored / "workspace" / "sp" / f"f{n}").stat()
        assert info.st_size == 1 << 30 and info.st_blocks < 64, info
    middle = restored / "workspace" / "sp" / "middle"
    assert middle.stat().st_size == 600 << 20 and middle.stat().st_blocks < 2048
    with open(middle, "rb") as read:
        read.seek(300 << 20)
        assert read.read(13) == b"in the middle"
    assert not (restored / "workspace" / "sid").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 20 MB tmpfs (as root; skipped elsewhere)."""
    disk = tmp_path / "small"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_restore_that_would_fill_the_disk_is_refused_before_writing(tmp_path: Path, small_disk: Path) -> None:
    home = a_home(tmp_path)
    (home / "workspace" / "big.bin").write_bytes(os.urandom(30 << 20))
    archive = tmp_path / "home.tgz"
    assert klaw_here(home, "backup", str(archive)).returncode == 0
    refused = klaw_here(home, "restore", str(archive), "--home", str(small_disk / "home"))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "the restored home needs about 31." in refused.stderr and "MB to spare" in refused.stderr
    assert re.search(r" has 2\d\.\d MB free: free some space there, or restore onto another disk", refused.stderr)
    assert list(small_disk.iterdir()) == []


def test_a_refused_restore_of_a_deep_archive_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "deep-bad-db.tgz"
    with tarfile.open(archive, "w:gz") as packed:
        for name, data in {"engine.yaml": b"embedder:\n  backend: fake\n  dim: 32\n", "klaw.db": b"x" * 4096}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            packed.addfile(info, io.BytesIO(data))
        for depth in range(1, 1101):
            folder = tarfile.TarInfo("workspace/" + "/".join(["d"] * depth))
            folder.type, folder.mode = tarfile.DIRTYPE, 0o700
            packed.addfile(folder)
    place = tmp_path / "place"
    place.mkdir()
    try:
        said = klaw_here(tmp_path / "unused", "restore", str(archive), "--home", str(place / "home"))
        assert said.returncode == 2 and "klaw.db does not open" in " ".join(said.stderr.split()), said.stderr
        assert "Traceback" not in said.stderr
        assert list(place.iterdir()) == []  # the hidden folder, 1,100 deep, removed
    finally:
        for left in place.iterdir():  # pytest's own clean-up would recurse through it
            remove_chain(left / "workspace")


def test_a_pipe_in_the_home_is_named_as_left_out(tmp_path: Path) -> None:
    """A FIFO made by code in the sandbox was passed over without a word (adversary32, decision 531): the
    "Left out:" line names it, and the archive restores (a pipe is a member klaw restore refuses)."""
    home = a_home(tmp_path)
    os.mkfifo(home / "workspace" / "jobs.pipe", 0o600)
    archive = tmp_path / "home.tgz"
    done = klaw_here(home, "backup", str(archive))
    assert done.returncode == 0, done.stdout + done.stderr
    left_out = " ".join(line for line in done.stdout.splitlines() if line.startswith("Left out: "))
    assert "workspace/jobs.pipe (a pipe, not a file)" in " ".join(left_out.split()), done.stdout
    back = klaw_here(home, "restore", str(archive), "--home", str(tmp_path / "restored"))
    assert back.returncode == 0 and not (tmp_path / "restored" / "workspace" / "jobs.pipe").exists(), back.stderr
