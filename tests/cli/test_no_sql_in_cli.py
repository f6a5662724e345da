"""The CLI reads and edits klaw.db through the storage protocol's repository methods, never with SQL of
its own: a second backend (PostgreSQL) then serves every command unchanged. (That the CLI and
`klaw reindex` import no backend module is an import-linter contract in pyproject.toml.)"""

from __future__ import annotations

import re
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "klaw" / "cli"
SQL = re.compile(
    r"\.execute\(|\bSELECT\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\bfetch_(all|one|value)\("
)


def test_no_cli_module_runs_sql() -> None:
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(CLI.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if SQL.search(line)
    ]
    assert list(CLI.glob("*.py")), CLI
    assert found == [], "SQL in the CLI: add a repository method to store/protocol.py instead:\n" + "\n".join(found)
