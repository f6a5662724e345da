"""The hidden folder a restore unpacks into, held by the restore while it lives, and its crashed ones found.

`klaw restore` unpacks into `.NAME.restoring-XXXXXXXX` beside the target (home_restore.py, decision 522) and
removes it on any failure it sees; a crash (SIGKILL, the machine stopping) leaves it, a copy of every
conversation in a folder nobody looks at. Here the folder is locked (an exclusive `flock` on the folder
itself) for as long as its restore's process lives: the lock goes with the process, however it ends. The
next restore into the same place finds the folders of that name no live process holds and removes them,
saying so; one a live process holds is another restore under way there, and the new one is refused.
(Decision 536: `klaw doctor` and `klaw init` look at a home, not at its parent, so they are left alone.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

Notice = Callable[[str], None]


def prefix(target: Path) -> str:
    return f".{target.name}.restoring-"


@contextlib.contextmanager
def staging_folder(target: Path, remove: Callable[[Path], None], notice: Notice | None = None) -> Iterator[Path]:
    """A new hidden 0700 folder beside `target`, locked while this block runs; before it is made, the folders a
    crashed restore into `target` left are removed with `remove` (each told to `notice`). The caller has
    refused a restore under way there (`under_way`)."""
    for stale in crashed_folders(target):
        size = _size(stale)
        remove(stale)
        if notice is not None:
            notice(
                f"Removed {stale} ({size / 1e6:,.1f} MB): the hidden folder of a restore into {target} that stopped"
                " before it ended (killed, or the machine stopped)"
            )
    staging = Path(tempfile.mkdtemp(prefix=prefix(target), dir=target.parent))  # 0700
    descriptor = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # released by the kernel however this process ends
        yield staging
    finally:
        os.close(descriptor)


def under_way(target: Path) -> Path | None:
    """The hidden folder of a live restore into `target` (a running process holds it), if any."""
    return next((path for path, held in _folders(target) if held), None)


def crashed_folders(target: Path) -> list[Path]:
    """The hidden folders of restores into `target` whose process is gone."""
    return [path for path, held in _folders(target) if not held]


def _folders(target: Path) -> list[tuple[Path, bool]]:
    """Each hidden folder of a restore into `target`, and whether a live process holds it (tried with a lock
    that does not wait, given back at once)."""
    found: list[tuple[Path, bool]] = []
    with contextlib.suppress(FileNotFoundError):
        with os.scandir(target.parent) as entries:
            names = sorted(
                e.name for e in entries if e.name.startswith(prefix(target)) and e.is_dir(follow_symlinks=False)
            )
        for name in names:
            path = target.parent / name
            try:
                descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue  # gone meanwhile, or not ours to open
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                found.append((path, False))
            except BlockingIOError:
                found.append((path, True))
            finally:
                os.close(descriptor)
    return found


def _size(top: Path) -> int:
    """What the folder's files hold (a walk by a stack: a crashed restore of a deep tree leaves a deep folder)."""
    total, stack = 0, [str(top)]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total
