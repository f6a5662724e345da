"""The memory commands on a home whose memory is in PostgreSQL (`database.backend: postgres`), as a person
runs them: they go to the database its variable names, so a missing variable is what they say, never that
`klaw.db` (which such a home does not have) does not exist yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home

VARIABLE = "KLAW_NOT_SET_ANYWHERE"


@pytest.mark.parametrize(
    "command",
    [("memory", "search", "parcel"), ("memory", "list"), ("memory", "forget", "exchange", "1", "--yes")],
)
def test_memory_commands_on_a_postgres_home_name_its_variable_not_klaw_db(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    home = a_home(tmp_path)
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    result = klaw_here(home, *command)
    said = " ".join(result.stderr.split())
    assert result.returncode != 0 and f"{VARIABLE} (database.urlEnv) is not set" in said
    assert "klaw.db" not in said and "Traceback" not in result.stderr
