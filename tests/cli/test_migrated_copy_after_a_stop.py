"""A forget on a home moved into PostgreSQL erases the SQLite copy the migrate left as its last step (decision
539), after the database and before it drops its note. Stopped there (a full disk while the copy's JSONL file is
rewritten, a kill), the note was finished at the next run by rewriting the home's own log only: the copy kept
the forgotten text for good, and nothing said so (decision 544). Real PostgreSQL, a real migrated home, the real
commands; the full disk is the copy's rewrite raising ENOSPC once."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import klaw.memory.log_rewrite as log_rewrite
import klaw.memory.migrated_copy as migrated_copy
from tests.cli.klaw_here import klaw_here
from tests.cli.test_migrated_home_words import _copy_holds, _moved
from tests.pg_server import PgServer


def test_a_forget_stopped_in_the_copys_erase_is_finished_there_by_the_next_run(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, env, _ = _moved(tmp_path, postgres_server)
    assert _copy_holds(home, "lighthouse")
    real = log_rewrite.remove_lines

    def full_disk(path: Path, ids: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(migrated_copy, "remove_lines", full_disk)
    stopped = klaw_here(home, "memory", "forget", "segment", "1", "--yes", env=env)
    assert stopped.returncode != 0, stopped.stdout
    assert _copy_holds(home, "lighthouse")  # the copy's erase never ran

    monkeypatch.setattr(migrated_copy, "remove_lines", real)  # room again
    again = klaw_here(home, "memory", "forget", "segment", "1", "--yes", env=env)

    assert "finished" in again.stdout.lower() + again.stderr.lower(), (again.stdout, again.stderr)
    assert not _copy_holds(home, "lighthouse")
