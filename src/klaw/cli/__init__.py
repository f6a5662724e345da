"""The `klaw` command: `noun verb` subcommands, each module one noun (the root is `cli/app.py`).

`main` is the `klaw` script's entry point. It imports the command line only when called, so a Ctrl-C
pressed during the second or so those imports (and typer's building of the command tree) take ends the
command quietly (exit 130, as a shell reports an interrupted command) instead of with a traceback.
Those imports run without the cyclic collector: the root callback turns it back on for the command run,
an engine's start once it has started (`klaw/start_up_heap.py`, decision 411). `klaw serve` and `klaw
engine` say their starting line on a terminal before those imports (`klaw/start_notes.py`, decision 513)."""

from __future__ import annotations

import gc
import sys

__all__ = ["main"]


def main() -> None:
    gc.disable()  # what loads now lives as long as the process: nothing for the collector to find
    try:
        from klaw.start_notes import say_at_once

        say_at_once(sys.argv)  # `klaw serve`'s first line before the command line loads (decision 513)
        from klaw.cli.app import main as run

        run()  # typer builds the command tree before click's own Ctrl-C handling starts
    except KeyboardInterrupt:
        raise SystemExit(130) from None
