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
