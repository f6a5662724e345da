#!/usr/bin/env bash
# Installs klaw with its dev dependencies into .venv and runs every check: ruff, mypy, the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The suite runs on the Python a fresh Debian 12 has, the README's machine: /usr/bin/python3.11 (3.11.2) where
# it is there, else python3. A newer 3.11 first on PATH (pyenv's, here) hid that `klaw restore` used what only
# 3.11.4 added, tarfile's filters, and so failed on every Debian 12 (decision 537). PYTHON=/path chooses another.
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3.11 ]; then PYTHON=/usr/bin/python3.11; else PYTHON=python3; fi
fi
export PYTHON
scripts/setup-venv.sh --dev
# An .venv made before from another Python is kept (scripts/run.sh uses it too), and said: CI's fresh clone's is new.
version() { "$1" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo "?"; }
if [ "$(version .venv/bin/python)" != "$(version "$PYTHON")" ]; then
  echo "The tests run on .venv's Python $(version .venv/bin/python), made before from another than $PYTHON" \
    "($(version "$PYTHON")); to test on that one: rm -rf .venv && scripts/test.sh" >&2
fi
# The terminal test of `klaw chat` types into a real terminal through tmux (it is skipped without it).
if ! command -v tmux >/dev/null; then
  scripts/apt-optional.sh tmux "the klaw chat terminal tests"
fi
# code_execute's sandbox (tests/tools/test_sandbox_escapes.py runs code in it for real; skipped without it).
if ! command -v bwrap >/dev/null; then
  scripts/apt-optional.sh bubblewrap "the code_execute sandbox tests"
fi
# The sandbox's seccomp filter is built by libseccomp (apt depends on it, so it is nearly always there).
if ! /sbin/ldconfig -p 2>/dev/null | grep 'libseccomp\.so\.2' >/dev/null; then
  scripts/apt-optional.sh libseccomp2 "the sandbox's seccomp filter tests"
fi
.venv/bin/ruff check src tests
# mypy keeps its cache outside the clone, so CI's fresh clone checks only what changed since the last run on this
# machine (~2 s instead of ~45 s of CPU); a module with errors is never cached, so it is checked again. Decision 357.
mypy_cache="${XDG_CACHE_HOME:-$HOME/.cache}/klaw/mypy"
(umask 077 && mkdir -p "$mypy_cache")
.venv/bin/mypy --cache-dir "$mypy_cache"
# One worker more than the CPUs (at most 4): most tests wait on a subprocess, a terminal or a socket
# (two workers on two CPUs left the machine at a load of ~2, mostly idle), and each worker has its own
# temporary directories and embedded PostgreSQL (tests/conftest.py). Decision 271. `worksteal`: a worker
# that has run its share takes tests queued on another, so the run does not end on one worker's backlog.
workers=$(( $(nproc) + 1 ))
.venv/bin/pytest -n "$(( workers < 4 ? workers : 4 ))" --dist worksteal "$@"
