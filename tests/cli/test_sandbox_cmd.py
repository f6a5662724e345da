"""`klaw sandbox status|install` as a person runs them: a subprocess on a temp KLAW_HOME. The package
installed is a wheel built in the test (no network), then imported by code_execute's Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.home import KlawHome
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.tools.sandbox_helpers import Runner, no_sandbox_reason
from tests.tools.test_code_execute_turns import _wheel

pytestmark = pytest.mark.skipif(no_sandbox_reason() is not None, reason=f"no sandbox here: {no_sandbox_reason()}")


def test_status_names_the_backend_or_why_there_is_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    shown = klaw_here(home, "sandbox", "status")
    assert shown.returncode == 0, shown.stderr
    assert "backend: bubblewrap" in shown.stdout and "network: off" in shown.stdout
    config = home / "engine.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("backend: auto", "backend: none"), encoding="utf-8")
    off = klaw_here(home, "sandbox", "status")
    assert off.returncode == 1
    assert "code_execute is not offered: sandbox.backend is none in engine.yaml" in off.stdout
    assert "fix: set sandbox.backend to auto in engine.yaml" in off.stdout


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="the sandbox's Python, /usr/bin/python3, is missing")
async def test_install_puts_a_package_where_code_execute_imports_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    installed = klaw(home, "sandbox", "install", "--no-index", str(_wheel(tmp_path)))
    assert installed.returncode == 0, installed.stderr
    assert f"installed into {home / 'sandbox' / 'venv'}" in installed.stdout
    venv = home / "sandbox" / "venv"
    readable = [p for p in (venv, *venv.rglob("*")) if not p.is_symlink() and p.stat().st_mode & 0o077]
    assert readable == []  # private like the rest of KLAW_HOME, whatever the umask
    assert "other users could read" not in klaw(home, "sandbox", "status").stderr
    result = await Runner(KlawHome(home)).run("import klawdemo; print('answer', klawdemo.ANSWER)")
    assert "answer 42" in result.content


def test_install_without_a_package_says_what_to_write(tmp_path: Path) -> None:
    klaw_here(tmp_path / "home", "init")  # a mistyped home is refused before the packages are looked at
    failed = klaw_here(tmp_path / "home", "sandbox", "install", "--no-index")
    assert failed.returncode == 1
    assert "name at least one package" in failed.stderr
