"""`klaw service install|uninstall|status` write and remove a systemd user unit; never enable it.

XDG_CONFIG_HOME points at a temp dir, so the person's own systemd configuration is never touched.
The unit is checked by `systemd-analyze verify` where it is installed (skipped, saying so, otherwise).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import klaw


def test_install_writes_a_unit_for_klaw_serve_of_this_home_status_and_uninstall(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    klaw(home, "init")
    assert klaw(home, "service", "status", env=env).returncode == 3  # not installed yet

    installed = klaw(home, "service", "install", env=env)
    assert installed.returncode == 0, installed.stderr
    unit = xdg / "systemd" / "user" / "klaw.service"
    text = unit.read_text(encoding="utf-8")
    assert f"ExecStart={sys.executable} -m klaw serve" in text
    assert f'Environment="KLAW_HOME={home}"' in text
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text
    assert "systemctl --user enable --now klaw.service" in installed.stdout  # said, never done

    status = klaw(home, "service", "status", env=env)
    assert status.returncode == 0 and f"installed: {unit}" in status.stdout

    removed = klaw(home, "service", "uninstall", env=env)
    assert removed.returncode == 0 and not unit.exists()


def test_install_refuses_an_invalid_config(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    (home / "engine.yaml").write_text("processing:\n  debounceMs: soon\n", encoding="utf-8")
    result = klaw(home, "service", "install", env={"XDG_CONFIG_HOME": str(xdg)})
    assert result.returncode == 2 and "processing.debounceMs" in result.stderr
    assert not (xdg / "systemd" / "user" / "klaw.service").exists()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    klaw(home, "init")
    assert klaw(home, "service", "install", env={"XDG_CONFIG_HOME": str(xdg)}).returncode == 0
    unit = xdg / "systemd" / "user" / "klaw.service"
    # System mode: `--user` needs a running user manager, which a CI container has not. It checks the same:
    # known sections and keys, values that parse, an ExecStart that is executable.
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Unknown key" not in result.stderr, result.stderr
