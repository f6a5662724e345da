"""What `klaw serve` and `klaw engine` say and do between the first Ctrl-C (or SIGTERM) and the end, and the
line they say at once when they start (the ready line can take 20 s on a loaded machine).

With a reply in flight the shutdown waits for it, up to the model's timeoutSeconds: the person is told
so, and, as in `klaw chat`, a second Ctrl-C quits at once. Those commands install their own SIGINT
handler (to shut down in order), so a second Ctrl-C used to change nothing at all.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from klaw.cli.context import say_while_stopping
from klaw.like_ctrl_c import stopped_like_ctrl_c

if TYPE_CHECKING:
    from klaw.engine.runtime import Engine
    from klaw.home import KlawHome

FINISHING = "stopping: finishing the reply in flight… (Ctrl-C again to quit at once)"
AT_ONCE = "quitting at once: the reply in flight is dropped; its message is kept and answered when klaw starts again"


def say_starting(command: str, home: KlawHome) -> None:
    """One line on stderr before the slow part of a start (imports, stores, embedder, MCP servers), so a person
    does not stare at nothing (newcomer16); the ready line still says when it is up. Not on stdout, which
    scripts read for the ready line and the web page's address; and only at a terminal, as a progress bar: a
    script, a unit's journal or a test reading stderr gets the ready line or the one-line error alone
    (decision 445)."""
    if not sys.stderr.isatty():
        return
    from klaw.start_notes import note, said_starting

    said_starting(command, home.root)  # unless the entry point said it already, before its imports (decision 513)
    note("loading the engine")  # its modules and the channels': most of a start's seconds under load (decision 513)


def stopping(engine: Engine | None, console: Console) -> None:
    """Say that klaw is stopping (and what it waits for); from now on a Ctrl-C ends the wait at once."""
    processor = engine.processor if engine is not None else None
    busy = processor is not None and bool(
        processor.slots.in_use or processor.waiting_chats or processor.turns_under_way
    )
    say_while_stopping(console, FINISHING if busy else "stopping…")
    if engine is None:
        return

    def at_once() -> None:
        say_while_stopping(console, AT_ONCE)
        engine.quit_at_once()

    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, at_once)


@contextmanager
def stopped_as_by_ctrl_c_while_starting() -> Iterator[None]:
    """Around a service command's run: a SIGTERM before its own handler is set is handed to SIGINT's
    handler, whichever it is at that moment (Python's, which raises KeyboardInterrupt, before the event
    loop; asyncio's, which cancels the main task, while it runs: like_ctrl_c.py), and the stop it asked ends
    with exit 0, as a SIGTERM after the start does (130 is Ctrl-C's, and a service manager would call it a
    failure)."""
    with stopped_like_ctrl_c(signal.SIGTERM) as came:
        try:
            yield
        except KeyboardInterrupt:
            if not came.asked:
                raise
            raise typer.Exit(0) from None
