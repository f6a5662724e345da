"""A `klaw restore` killed part-way (kill -9, the machine stopping) left its hidden `.NAME.restoring-…` folder, a
copy of every conversation nobody looks at, forever (decisions 522, 524). The folder is locked while its restore's
process lives (decision 536): a second restore into the same place meanwhile is refused, and the next one after
the crash removes the folder, saying so. Real processes: the kill is a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home


def _hidden(place: Path) -> list[Path]:
    return sorted(place.glob(".restored.restoring-*"))


def _locked_by(pid: int, folder: Path) -> bool:
    """Whether process `pid` holds a flock on `folder` (/proc/locks: kind, …, pid, device:inode)."""
    try:
        inode = folder.stat().st_ino
    except FileNotFoundError:
        return False
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "FLOCK" in fields and str(pid) in fields and any(f.endswith(f":{inode}") for f in fields):
            return True
    return False


def test_a_restore_killed_part_way_leaves_a_folder_the_next_restore_removes(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    (home / "workspace" / "photos.bin").write_bytes(os.urandom(80 << 20))  # a restore that takes a while
    archive = tmp_path / "home.tgz"
    assert klaw_here(home, "backup", str(archive)).returncode == 0
    place = tmp_path / "place"
    place.mkdir()
    target = place / "restored"
    env = {**os.environ, "KLAW_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen(
        [sys.executable, "-m", "klaw", "restore", str(archive), "--home", str(target)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while first.poll() is None and time.monotonic() < deadline:
            if any(_locked_by(first.pid, folder) for folder in _hidden(place)):
                break
            time.sleep(0.005)
        first.send_signal(signal.SIGSTOP)  # part-way: unpacking into its hidden folder
        assert first.poll() is None and len(_hidden(place)) == 1, "the restore ended before it could be stopped"
        (left,) = _hidden(place)

        beside = klaw_here(home, "restore", str(archive), "--home", str(target))
        said = " ".join(beside.stderr.split())
        assert beside.returncode == 2, beside.stdout + beside.stderr
        assert f"another klaw restore into {target} is under way (a running process holds its folder {left})" in said
        assert _hidden(place) == [left], "a live restore's folder was touched"
    finally:
        first.kill()
        first.wait()
    assert left.is_dir() and not target.exists()  # what the crash leaves

    again = klaw_here(home, "restore", str(archive), "--home", str(target))
    assert again.returncode == 0, again.stdout + again.stderr
    said = " ".join(again.stderr.split())
    assert f"Removed {left} (" in said and f"the hidden folder of a restore into {target} that stopped before" in said
    assert _hidden(place) == [] and (target / "workspace" / "photos.bin").stat().st_size == 80 << 20
    assert f"Restored {target}" in again.stdout
