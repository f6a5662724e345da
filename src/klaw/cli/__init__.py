"""The `klaw` command: `noun verb` subcommands, each module one noun (the root is `cli/app.py`).

`main` is the `klaw` script's entry point. It imports the command line only when called, so a Ctrl-C
pressed during the second or so those imports (and typer's building of the command tree) take ends the
command quietly (exit 130, as a shell reports an interrupted command) instead of with a traceback.
Those imports run without the cyclic collector: the root callback turns it back on for the command run,
an engine's start once it has started (`klaw/start_up_heap.py`, decision 411)."""

from __future__ import annotations

import gc

__all__ = ["main"]


def main() -> None:
    gc.disable()  # what loads now lives as long as the process: nothing for the collector to find
    try:
        from klaw.cli.app import main as run

        run()  # typer builds the command tree before click's own Ctrl-C handling starts
    except KeyboardInterrupt:
        raise SystemExit(130) from None
