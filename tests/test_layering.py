"""The layering holds: `lint-imports` checks the contracts in pyproject.toml ([tool.importlinter]).

Dependencies point downwards (cli → engine → tools, scheduling → memory → store, llm; channels and the
gateway beside the engine, reaching it through the socket's frames). A forbidden import, direct or
through other modules, fails here with the chain that breaks the contract.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_import_contract_is_kept() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    lint_imports = Path(sys.executable).parent / "lint-imports"
    assert lint_imports.exists(), "import-linter is a dev dependency: run scripts/setup-venv.sh --dev"
    result = subprocess.run(
        [str(lint_imports), "--no-cache", str(REPO / "pyproject.toml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, (
        "An import breaks the layering (ARCHITECTURE.md, first lines). Move the code to the layer it belongs to, or "
        f"pass what it needs in from above; lint-imports says:\n{report}"
    )
    assert f"Contracts: {len(contracts)} kept, 0 broken." in report, report
