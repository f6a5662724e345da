"""The set-up scripts survive a busy apt: an optional package that cannot be installed (the dpkg lock
held by another apt) skips the tests that need it, saying why, instead of killing scripts/test.sh."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
LOCKED_APT = """#!/bin/sh
echo "$@" >> "$APT_CALLS"
echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
exit 100
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the script only tries apt-get as root")
def test_a_busy_apt_waits_for_the_lock_then_skips_saying_why(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "apt-get").write_text(LOCKED_APT, encoding="utf-8")
    (fake_bin / "apt-get").chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "APT_CALLS": str(calls)}
    result = subprocess.run(
        [str(SCRIPTS / "apt-optional.sh"), "chromium", "the web page browser tests"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "Could not install chromium (E: Could not get lock /var/lib/dpkg/lock-frontend" in result.stderr
    assert "the web page browser tests will be skipped" in result.stderr
    assert "-o DPkg::Lock::Timeout=300" in calls.read_text(encoding="utf-8")


def test_setup_and_test_scripts_install_optional_packages_through_it() -> None:
    for script, package in (("setup-venv.sh", "chromium"), ("test.sh", "tmux"), ("test.sh", "bubblewrap")):
        text = (SCRIPTS / script).read_text(encoding="utf-8")
        assert f"scripts/apt-optional.sh {package}" in text
