"""klaw needs sqlite-vec (DESIGN: vectors live in vec0 tables; there is no vector-less mode to fall back
to). When the installed extension cannot be loaded, every command that opens the database stops with
one clear line saying how to repair the install — not a traceback, and before anything is written.

A broken install is reproduced for real: a `sqlite_vec` package earlier on the path whose loadable
library is not a shared object, as a half-finished or wrong-platform install leaves it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from klaw.store.sqlite.store import SqliteStore
from tests.cli.inited_home import init_home


@pytest.fixture
def broken_sqlite_vec(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "sqlite_vec"
    package.mkdir(parents=True)
    library = package / "vec0.so"
    library.write_bytes(b"not a shared object")
    (package / "__init__.py").write_text(f"def loadable_path():\n    return {str(library.with_suffix(''))!r}\n")
    return tmp_path / "site"


def klaw(home: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200", "PYTHONPATH": str(site)}
    # A message on stdin: `klaw chat` refuses empty piped input before it opens the database (decision 240).
    return subprocess.run(
        [sys.executable, "-m", "klaw", *args], input="hello\n", capture_output=True, text=True, env=env, timeout=60
    )


COMMANDS = [
    ("engine",),
    ("chat", "--skip-check"),
    ("serve",),
    ("reindex",),
    ("db", "info"),
    ("memory", "search", "lake house"),
    ("memory", "forget", "exchange", "1", "--yes"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
async def test_a_broken_sqlite_vec_install_is_one_clear_error(
    tmp_path: Path, broken_sqlite_vec: Path, command: tuple[str, ...]
) -> None:
    home = tmp_path / "home"
    init_home(home)  # as `klaw init` makes it, without a klaw process of its own
    await (await SqliteStore.open(home / "klaw.db")).aclose()  # a home an engine has run in (with sqlite-vec)
    (home / "klaw.db").chmod(0o600)  # as the engine leaves it (this process's umask is not klaw's)
    result = klaw(home, broken_sqlite_vec, *command)
    said = " ".join(result.stderr.split())  # rich wraps long lines
    assert result.returncode != 0
    assert said.startswith("error: cannot load sqlite-vec into SQLite")
    assert "Reinstall it with 'pip install --force-reinstall sqlite-vec'" in said
    assert "Traceback" not in result.stderr
    assert not (home / "engine.sock").exists()
