"""Removing a chain of folders thousands deep (`d/d/d/…`) that tests of deep trees make (decision 524):
shutil.rmtree recurses once per level (RecursionError past ~1,000 on Python 3.11), and pytest removes old
temporary folders with it, so such a tree left behind broke later test sessions."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def remove_chain(parent: Path, name: str = "d") -> None:
    """Remove `parent/name` and the chain of `name` folders in it, one level at a time from the top: the
    second level is moved up in place of the first, which is then shallow enough for rmtree."""
    top, spare = parent / name, parent / f".{name}-up"
    while top.is_dir() and not top.is_symlink():
        inner = top / name
        if inner.is_dir() and not inner.is_symlink():
            os.rename(inner, spare)
            shutil.rmtree(top)
            os.rename(spare, top)
        else:
            shutil.rmtree(top)
