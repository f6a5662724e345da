#!/usr/bin/env bash
# Installs klaw with its dev dependencies into .venv and runs every check: ruff, mypy, the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh --dev
.venv/bin/ruff check src tests
.venv/bin/mypy
.venv/bin/pytest "$@"
