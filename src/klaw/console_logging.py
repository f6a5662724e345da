"""Log lines printed through the rich `Console` that also draws a live display (spinner, progress bars).

A plain `StreamHandler` writes to stderr at the cursor, wherever the spinner or a progress bar is
being redrawn: `⠇ thinking…WARNING klaw.llm.http…`. Printed through the same console instead, rich
puts each line above the live display, whole. Lines are literal text (`Text`, never markup: a log
line may quote a path like `[/tmp]`) and soft-wrapped by the terminal, so they read as before:
`LEVEL logger: message`.

`klaw chat` is a conversation, not an operator's console: there the lines go to a log file
(`KLAW_HOME/logs/chat.log`) and the screen gets one line, the first time something is logged,
saying where they are. Model retries and tool timeouts printed between the person's question and
the friendly answer that explains them were noise. `--verbose` still shows every line on the screen;
the file keeps warnings and errors only, with or without it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from logging.handlers import RotatingFileHandler
from pathlib import Path

from rich.console import Console
from rich.text import Text

from klaw.log_format import FORMAT, QuietLogFailures, SafeFormatter
from klaw.private_files import open_private, private_dirs

FILE_FORMAT = "%(asctime)s " + FORMAT
LOG_FILE_BYTES = 1_000_000
"""A chat's log file is rotated at this size, one older file kept: warnings, not a transcript."""
_STYLES = {logging.WARNING: "yellow", logging.ERROR: "red", logging.CRITICAL: "bold red"}


class ConsoleLogHandler(QuietLogFailures, logging.Handler):
    """Each record as one literal line printed through `console`."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self._console = console
        self.setFormatter(SafeFormatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = Text(self.format(record), style=_STYLES.get(record.levelno, ""))
            self._console.print(line, soft_wrap=True, highlight=False)
        except Exception:  # a log line must never take the program down
            self.handleError(record)


class PrivateRotatingFileHandler(QuietLogFailures, RotatingFileHandler):
    """logging's rotating file, each file it opens (the first, and the new one after a rotation)
    created 0600 rather than with the umask's 0644: the log names chats and errors."""

    def _open(self) -> io.TextIOWrapper:
        descriptor = open_private(Path(self.baseFilename), os.O_WRONLY | os.O_APPEND)
        return open(descriptor, "a", encoding=self.encoding, errors=self.errors)


class PointerOnce(QuietLogFailures, logging.Handler):
    """The first record, as one line saying where the log file is; nothing after it."""

    def __init__(self, console: Console, log_file: Path) -> None:
        super().__init__()
        self._console = console
        self._log_file = log_file
        self._shown = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._shown or getattr(record, "log_file_only", False):
            return
        self._shown = True
        try:
            level = record.levelname.lower()
            article = "an" if level[:1] in "aeiou" else "a"  # an error, a warning
            line = Text(f"(klaw logged {article} {level}: see {self._log_file})", style="dim")
            self._console.print(line, soft_wrap=True, highlight=False)
        except Exception:
            self.handleError(record)


@contextmanager
def logs_through(console: Console, log_file: Path | None = None) -> Iterator[None]:
    """While inside: the root logger's handlers are replaced by one printing through `console`
    (same level); the previous handlers are back afterwards. With `log_file`, records are written
    there (warnings and errors) and the screen gets `PointerOnce`, unless the level is DEBUG (--verbose):
    then the screen gets every line."""
    root = logging.getLogger()
    previous = root.handlers[:]
    handlers: list[logging.Handler] = [ConsoleLogHandler(console)]
    if log_file is not None:
        private_dirs(log_file.parent)
        writer = PrivateRotatingFileHandler(
            log_file, maxBytes=LOG_FILE_BYTES, backupCount=1, encoding="utf-8", delay=True
        )
        writer.setFormatter(SafeFormatter(FILE_FORMAT))
        # The file keeps warnings and errors, with or without --verbose: -v's debug lines (httpcore's traces,
        # a thousand a turn) are for the screen, as its help says; they filled chat.log (decision 489).
        writer.setLevel(logging.WARNING)
        verbose = root.getEffectiveLevel() <= logging.DEBUG
        handlers = [writer, handlers[0] if verbose else PointerOnce(console, log_file)]
    root.handlers = handlers
    try:
        yield
    finally:
        root.handlers = previous
        for handler in handlers:
            with contextlib.suppress(OSError):  # a log file on a full disk: said once, by `QuietLogFailures`
                handler.close()
