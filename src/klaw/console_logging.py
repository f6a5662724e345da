"""Log lines printed through the rich `Console` that also draws a live display (spinner, progress bars).

A plain `StreamHandler` writes to stderr at the cursor, wherever the spinner or a progress bar is
being redrawn: `⠇ thinking…WARNING klaw.llm.http…`. Printed through the same console instead, rich
puts each line above the live display, whole. Lines are literal text (`Text`, never markup: a log
line may quote a path like `[/tmp]`) and soft-wrapped by the terminal, so they read as before:
`LEVEL logger: message`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.text import Text

FORMAT = "%(levelname)s %(name)s: %(message)s"
_STYLES = {logging.WARNING: "yellow", logging.ERROR: "red", logging.CRITICAL: "bold red"}


class ConsoleLogHandler(logging.Handler):
    """Each record as one literal line printed through `console`."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self._console = console
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = Text(self.format(record), style=_STYLES.get(record.levelno, ""))
            self._console.print(line, soft_wrap=True, highlight=False)
        except Exception:  # a log line must never take the program down
            self.handleError(record)


@contextmanager
def logs_through(console: Console) -> Iterator[None]:
    """While inside: the root logger's handlers are replaced by one printing through `console`
    (same level); the previous handlers are back afterwards."""
    root = logging.getLogger()
    previous = root.handlers[:]
    handler = ConsoleLogHandler(console)
    root.handlers = [handler]
    try:
        yield
    finally:
        root.handlers = previous
