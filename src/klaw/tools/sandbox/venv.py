"""The sandbox virtualenv: Python packages the person chose for `code_execute` (`klaw sandbox install`).

It lives in KLAW_HOME (`sandbox/venv`) and is mounted read-only at /opt/klaw-venv by the bubblewrap
backend, whose `python` it then is. It is made from the system's `/usr/bin/python3`, the interpreter
the sandbox sees under /usr, whatever Python klaw itself runs on; klaw's own pip installs into it
(`pip --python`), on the host, with the network the host has, and only when the person asks.
Code in the sandbox cannot change it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from klaw.errors import KlawError
from klaw.private_files import private_dirs

SYSTEM_PYTHON = Path("/usr/bin/python3")
_TAIL_LINES = 15


class SandboxInstallError(KlawError, RuntimeError):
    """The sandbox virtualenv could not be made or the packages not installed; says why."""


def install(venv: Path, packages: Sequence[str], *, python: Path = SYSTEM_PYTHON) -> str:
    """Make `venv` if needed and pip-install `packages` (pip's own arguments allowed) into it; returns
    pip's last lines. Blocking: a CLI command, or a thread."""
    if all(word.startswith("-") for word in packages):  # nothing named, only pip's options
        raise SandboxInstallError("name at least one package to install, e.g. klaw sandbox install pandas")
    target = venv / "bin" / "python"
    if not target.exists():
        if not python.exists():
            raise SandboxInstallError(f"{python} is missing: the sandbox runs the system's Python 3; install python3")
        private_dirs(venv.parent)
        # Without pip of its own (no ensurepip, seconds faster): klaw's pip installs into it (--python).
        _run([str(python), "-m", "venv", "--without-pip", str(venv)], "making the virtualenv")
    pip = [sys.executable, "-m", "pip", "--python", str(target)]
    command = [*pip, "install", "--disable-pip-version-check", "--no-input"]
    try:
        return _run([*command, *packages], "pip install")
    finally:
        _make_private(venv)


def _make_private(venv: Path) -> None:
    """Take group and others' bits off every file of the virtualenv: the umask covers what is written,
    but venv copies its activate scripts with their source's mode (0644)."""
    for path in (venv, *venv.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        if mode & 0o077:
            path.chmod(mode & 0o700)


def _run(argv: list[str], what: str) -> str:
    try:
        # umask 077: the virtualenv and the packages pip writes are private like the rest of KLAW_HOME
        # (0700/0600), instead of the activate scripts and site-packages others could read.
        done = subprocess.run(argv, capture_output=True, text=True, check=False, umask=0o077)
    except OSError as exc:
        raise SandboxInstallError(f"{what} could not start: {exc}") from None
    said = "\n".join((done.stdout + done.stderr).strip().splitlines()[-_TAIL_LINES:])
    if done.returncode != 0:
        hint = " (python3-venv is needed: apt install python3-venv)" if "ensurepip" in said else ""
        raise SandboxInstallError(f"{what} failed{hint}:\n{said}")
    return said
