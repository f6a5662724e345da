"""A refusal says its one line and nothing before it (newcomer20, decision 490): `klaw reindex` refused
because an engine holds the home printed an empty line on stdout first (rich's last render of bars that
never began), which read as a half-started run."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import klaw
from tests.cli.test_reindex_cmd import a_home


def test_a_refused_reindex_prints_nothing_on_stdout(tmp_path: Path) -> None:
    from klaw.home_lock import HomeLock

    home = a_home(tmp_path)
    lock = HomeLock.acquire(home)  # an engine (klaw serve) holds the home
    try:
        refused = klaw(home, "reindex")
    finally:
        lock.release()
    assert refused.returncode == 1 and "then run 'klaw reindex' again" in " ".join(refused.stderr.split())
    assert refused.stdout == "", repr(refused.stdout)
    assert "Traceback" not in refused.stderr
