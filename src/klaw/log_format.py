"""klaw's log lines, with nothing in a message obeyed by a terminal or read as a line of its own
(decision 296).

A log message quotes what others wrote: an MCP server's error, a plugin's exception, a skill's name, a
model server's answer. Printed raw, `\\x1b]0;…\\x07` sets the terminal's title, `\\x1b[31m` colours what
follows, U+202E reorders the line, and a CR LF followed by `WARNING klaw.engine: …` is a fake log line
in `klaw serve -v` or the log file. Escaping at each call site misses the next one, so every handler
klaw sets up formats with `SafeFormatter`: the message is made one line (`terminal_text.one_line`), a
traceback keeps its frames' lines but shows their control characters (`visible`), and each exception's
own message in it is one line too (an MCP server's `ValueError('x\\n… WARNING klaw.engine: …')`
forged a line there: adversary7). A URL's password and query
values are masked in both (`redaction.py`): httpx logs `HTTP Request: POST …?api-key=…` at INFO, which
`klaw -v` shows.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from klaw.disk_trouble import disk_trouble
from klaw.redaction import mask_url_credentials
from klaw.terminal_text import one_line, visible

FORMAT = "%(levelname)s %(name)s: %(message)s"
LOG_FILE_ONLY = {"log_file_only": True}
"""`extra=` for a warning that belongs in the log but is no news on the chat screen: a broken skill is said
by `klaw config check`/`klaw skills check` and logged once per start; `klaw chat`'s "(klaw logged a
warning: see …)" pointer after every piped message was noise (console_logging.PointerOnce)."""


class SafeFormatter(logging.Formatter):
    """A `logging.Formatter` whose message is one line of shown characters; its traceback and stack
    keep their line breaks (they are klaw's) with every control character in them shown."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        safe = logging.makeLogRecord(record.__dict__)  # the record itself stays as logged, for other handlers
        safe.message = one_line(mask_url_credentials(record.message))
        return super().formatMessage(safe)

    def formatException(
        self, ei: tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
    ) -> str:
        if ei[0] is None or ei[1] is None:
            return visible(mask_url_credentials(super().formatException(ei)))
        parts: list[str] = []
        for chunk in traceback.TracebackException(ei[0], ei[1], ei[2], compact=True).format():
            if chunk.startswith(("Traceback", "  File", "\n")):  # klaw's frames, and the chains' separators
                parts.append(visible(chunk))
            else:  # an exception's own words (`ValueError: …`), often another program's: one line each
                parts.append(one_line(chunk.removesuffix("\n")) + "\n")
        return mask_url_credentials("".join(parts).removesuffix("\n"))

    def formatStack(self, stack_info: str) -> str:
        return visible(mask_url_credentials(super().formatStack(stack_info)))


@contextlib.contextmanager
def held_back(*names: str, level: int = logging.ERROR) -> Iterator[None]:
    """While inside, the loggers `names` pass only records of `level` and above (a command whose own report
    says what they would); each is given back its own level after, so a program or test that ran the command
    in its process keeps its logging as it set it (`klaw reindex` left one at ERROR: decision 473)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
    try:
        yield
    finally:
        for logger, kept in zip(loggers, levels, strict=True):
            logger.setLevel(kept)


_told: set[str] = set()  # where a failure to log was already said, once per process


class QuietLogFailures:
    """A handler mixin: a record that cannot be written (a full disk under the log file, a closed stderr)
    is one line on stderr, the first time for each place, never logging's `--- Logging error ---` and a
    traceback for every record (adversary8: ~150 lines twice per turn on a full disk; decision 320)."""

    def handleError(self, record: logging.LogRecord) -> None:
        del record  # its message is not repeated: it may quote a conversation
        failure = sys.exc_info()[1]
        filename = getattr(self, "baseFilename", None)
        where = str(filename) if isinstance(filename, str) else "stderr"
        if where in _told or not logging.raiseExceptions:
            return
        _told.add(where)
        reason = disk_trouble(Path(where), failure) if filename is not None and failure is not None else None
        if reason is None:
            reason = one_line(f"{type(failure).__name__}: {failure}") if failure is not None else "unknown"
        with contextlib.suppress(Exception):
            sys.stderr.write(f"klaw: log lines cannot be written to {where}, later ones are dropped: {reason}\n")
            sys.stderr.flush()
