"""The `klaw` command: `noun verb` subcommands, each module one noun (the root is `cli/app.py`).

`main` is the `klaw` script's entry point. It imports the command line only when called, so a Ctrl-C
pressed during the second or so those imports (and typer's building of the command tree) take ends the
command quietly (exit 130, as a shell reports an interrupted command) instead of with a traceback."""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    try:
        from klaw.cli.app import main as run

        run()  # typer builds the command tree before click's own Ctrl-C handling starts
    except KeyboardInterrupt:
        raise SystemExit(130) from None
