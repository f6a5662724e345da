"""A file system of a test's own to fill: a tmpfs of a given size (root only; the test is skipped otherwise),
and a file filling it.

Shared by the full-disk tests of the CLI, the library, the scheduler and the sandbox's quota, which each had a copy."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(where: Path, size: str, inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs of `size` (and at most `inodes` files and folders) mounted at `where` (made here), unmounted
    afterwards."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a disk of its own to fill needs a tmpfs, which only root can mount")
    options = f"size={size}" + ("" if inodes is None else f",nr_inodes={inodes}")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> Path:
    """A file of zeros taking every free byte of `folder`'s file system."""
    filler = folder / "filler"
    written = subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, text=True)
    assert "No space left on device" in written.stderr, written.stderr
    return filler


def fill_inodes(folder: Path) -> list[Path]:
    """Empty files taking every free inode of `folder`'s file system (its blocks stay free)."""
    made: list[Path] = []
    while True:
        path = folder / f"empty-{len(made)}"
        try:
            path.touch()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            return made
        made.append(path)
