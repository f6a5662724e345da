#!/usr/bin/env bash
# Installs klaw into .venv, creates ~/.klaw (or $KLAW_HOME) on first use, and starts a chat in this terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh
.venv/bin/klaw init --if-missing
exec .venv/bin/klaw chat "$@"
