#!/usr/bin/env bash
# Installs klaw with its dev dependencies into .venv and runs every check: ruff, mypy, the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh --dev
# The terminal test of `klaw chat` types into a real terminal through tmux (it is skipped without it).
if ! command -v tmux >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing tmux (Debian)..." >&2
    apt-get update -qq && apt-get install -y -qq tmux >/dev/null
  else
    echo "tmux is missing: the klaw chat terminal test will be skipped (sudo apt-get install tmux)." >&2
  fi
fi
.venv/bin/ruff check src tests
.venv/bin/mypy
.venv/bin/pytest "$@"
