#!/usr/bin/env bash
# Installs klaw with its dev dependencies into .venv and runs every check: ruff, mypy, the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh --dev
# The terminal test of `klaw chat` types into a real terminal through tmux (it is skipped without it).
if ! command -v tmux >/dev/null; then
  scripts/apt-optional.sh tmux "the klaw chat terminal tests"
fi
# code_execute's sandbox (tests/tools/test_sandbox_escapes.py runs code in it for real; skipped without it).
if ! command -v bwrap >/dev/null; then
  scripts/apt-optional.sh bubblewrap "the code_execute sandbox tests"
fi
.venv/bin/ruff check src tests
.venv/bin/mypy
# One worker per CPU (at most 4): most tests wait on a subprocess, a terminal or a socket, and each
# worker has its own temporary directories and embedded PostgreSQL (tests/conftest.py).
.venv/bin/pytest -n auto --maxprocesses 4 "$@"
