"""The maintenance commands' writers make their files private by themselves (decision 237), not only
through the `klaw` command's umask of 0o077 (decision 050): the very code they run is what a program
using klaw as a library runs under its own umask.

Each command runs in a real subprocess under umask 022 through the command's `app` (everything `klaw`
does but `main`'s `restrict_umask`), on a home with a conversation log; then every path of the home
is walked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_reindex_cmd import a_home
from tests.conftest import new_database
from tests.pg_server import PgServer
from tests.test_library_private_files import loose, modes

# The `klaw` command without `main`'s umask: the writers alone under the usual umask 022.
UNDER_022 = "import os; os.umask(0o022); from klaw.cli.app import app; app(prog_name='klaw')"
VARIABLE = "KLAW_TEST_DATABASE_URL"


def klaw_under_022(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200", **(env or {})}
    command = [sys.executable, "-c", UNDER_022, *args]
    return subprocess.run(command, capture_output=True, text=True, env=full_env, timeout=120, check=False)


def test_reindex_under_umask_022_writes_its_database_private(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    done = klaw_under_022(home, "reindex")
    assert done.returncode == 0, done.stderr
    found = modes(home)
    assert "klaw.db" in found  # built as klaw.db.reindex (with its -wal and -shm), then swapped in
    assert loose(found, home, set()) == []


def test_db_migrate_under_umask_022_leaves_nothing_others_can_read(tmp_path: Path, postgres_server: PgServer) -> None:
    home = a_home(tmp_path)
    assert klaw_under_022(home, "reindex").returncode == 0
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}
    moved = klaw_under_022(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)
    assert moved.returncode == 0, moved.stderr
    assert "warning" not in moved.stderr
    assert loose(modes(home), home, set()) == []
