"""Which klaw this is: the installed distribution's version, for `klaw --version`, a benchmark's
report and the MCP server's `serverInfo` (a bug report or a client needs the installed one, not a
constant in the source that a release might forget to raise)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def klaw_version() -> str:
    """The version pip installed, or "unknown" when klaw runs from a source tree never installed."""
    try:
        return version("klaw")
    except PackageNotFoundError:
        return "unknown"


GIT_SECONDS = 2.0


def source_build() -> str | None:
    """The git commit klaw runs from, when it runs from a checkout (`PYTHONPATH=src`, an editable install):
    "git 7da3c8c1a2b3", with " + local changes" when tracked files differ from it; None for an installed
    wheel, or when git is missing or slow. Asked by `klaw --version` only, never at a command's start:
    it costs a `git` subprocess (docs/decisions/398-version-names-the-commit.md)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent.parent  # src/klaw/distribution.py → the checkout
    if not (root / ".git").exists() or not (root / "pyproject.toml").exists():
        return None
    git = ["git", "-C", str(root)]
    try:
        commit = subprocess.run(
            [*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=GIT_SECONDS, check=True
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"git {commit}{' + local changes' if changed else ''}" if commit else None
