"""A home as `klaw init` makes it, for the tests that start from one (`init_home`).

`klaw init` is a whole klaw process: ~0.8 s of CPU a start, paid by some 60 tests before they start the
command they are about. It runs once per test process (per environment it could read) into a template, and
each test gets a copy: what init writes names nothing of the home's own path (two homes it made compare
equal with `diff -r`), and the copy keeps every mode (0700 folders, 0600 files). A home that already holds
something gets the real `klaw init`, which must decide what to keep (decision 380).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

INIT_SECONDS = 120  # a `klaw init` run on a loaded machine

_templates: dict[tuple[tuple[str, str], ...], Path] = {}


def klaw_init(home: Path) -> None:
    """`klaw init` run for `home` as a person runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "klaw", "init"],
        capture_output=True,
        text=True,
        env={**os.environ, "KLAW_HOME": str(home)},
        timeout=INIT_SECONDS,
    )
    assert result.returncode == 0, result.stderr


def _environment() -> tuple[tuple[str, str], ...]:
    """What of the environment `klaw init` could read besides KLAW_HOME (its settings, the language)."""
    read = ("KLAW", "LANG", "LC_", "XDG_")
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(read) and k != "KLAW_HOME"))


def _template() -> Path:
    key = _environment()
    if key not in _templates:
        folder = Path(tempfile.mkdtemp(prefix="klaw-test-template-"))
        atexit.register(shutil.rmtree, folder, True)
        klaw_init(folder / "home")
        _templates[key] = folder / "home"
    return _templates[key]


def init_home(home: Path) -> None:
    """`home` as `klaw init` makes it: a copy of the template unless the folder already holds something."""
    if home.exists() and any(home.iterdir()):
        klaw_init(home)
        return
    shutil.copytree(_template(), home, symlinks=True, dirs_exist_ok=True)
