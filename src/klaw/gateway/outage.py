"""`EngineOutage`: what a person watching `klaw gateway` is told when the engine goes away and comes back.

The gateway logs under the WARNING root logger `klaw` sets up, and its link reconnects quietly (each
attempt at INFO, seen only with `--verbose`). Without a word at WARNING, a person watching the
gateway's terminal could not tell that messages were now waiting in the buffer (and the web page's
history and search failing) until the engine returned. So each outage is said in two lines, once
each, never per retry: one when the engine is lost (or is not there when the gateway starts), one
when it is back, with how long it was away and how many messages are waiting to be sent. The lines
name the reason by its exception type only, never a message's text.

`klaw serve` stops its own engine at shutdown: `expect_stop()` turns that loss into an INFO line. An attached
`klaw chat` says the engine's going and return on its screen itself: `said_on_screen()` keeps the lines in its
log file, without the "(klaw logged a warning: see …)" pointer that only repeated them (decision 464).
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from klaw.engine.clock import Clock
from klaw.log_format import LOG_FILE_ONLY

log = logging.getLogger("klaw.gateway.link")

WAITING = "messages are kept in the gateway's buffer and sent when it is back"
START_GRACE_SECONDS = 10.0
"""A gateway started beside (or just before) `klaw engine` waits this long for it before warning: the
engine's start (stores, embedder) takes seconds, and "not running" then "reached the engine after 0.7 s"
was two WARNING lines of no news (newcomer9). The first miss is said at INFO."""


def duration_text(seconds: float) -> str:
    """`4.2 s`, `3 min 12 s`, `2 h 5 min`: how long the engine was away, in the words a person reads."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


class EngineOutage:
    """One outage at a time: opened by the first failure, closed (and timed) by the next hello."""

    def __init__(self, clock: Clock, socket_path: Path) -> None:
        self._clock = clock
        self._path = socket_path
        self._since: datetime | None = None
        self._expected = False
        self._held: str | None = None  # the start's "not running" line, held through the grace
        self._extra: dict[str, bool] = {}  # LOG_FILE_ONLY when the person is told on the screen already

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def expect_stop(self) -> None:
        """This process stops the engine itself (`klaw serve`): losing it now is no news."""
        self._expected = True

    def said_on_screen(self) -> None:
        """The program tells the person of each outage itself (an attached `klaw chat`): the lines go to its
        log file only, never pointed at on the screen."""
        self._extra = dict(LOG_FILE_ONLY)

    def unreachable(self, error: OSError, *, ever_connected: bool) -> None:
        """Connecting failed; said once, at the first failure of an outage."""
        if ever_connected:
            self.lost(error)
        elif isinstance(error, FileNotFoundError | ConnectionRefusedError):
            line = (
                f"the engine is not running (nothing answers on {self._path}); start it with `klaw engine`."
                f" Until then {WAITING}"
            )
            if self._since is None:
                self._held = line
                self._open(line, level=logging.INFO)
            elif self._held is not None and (self._clock.now() - self._since).total_seconds() >= START_GRACE_SECONDS:
                self._held = None
                log.warning("%s", line, extra=self._extra)
        else:
            self._open(f"cannot reach the engine on {self._path} ({_why(error)}); {WAITING}")

    def lost(self, error: BaseException) -> None:
        """A connection to the engine ended (closed, reset, an ack never came)."""
        self._open(f"lost the engine ({_why(error)}); {WAITING}")

    def refused(self, words: str) -> None:
        """The engine refused the connection in an `error` frame (too many open): its words, once an outage."""
        self._open(f"the engine refused this gateway's connection: {words}; {WAITING}")

    def reached(self, buffered: int, *, first: bool) -> None:
        """A hello went through: the end of an outage, if one was said (`first`: the gateway's first hello)."""
        if self._since is None:
            return
        away = duration_text((self._clock.now() - self._since).total_seconds())
        self._since = None
        news = "reached the engine" if first else "the engine is back"
        quiet = self._held is not None  # found within the start's grace: its miss was said at INFO only
        self._held = None
        log.log(
            logging.INFO if quiet else logging.WARNING,
            "%s after %s; %d buffered message(s) to send",
            news,
            away,
            buffered,
            extra=self._extra,
        )

    def _open(self, line: str, level: int = logging.WARNING) -> None:
        if self._since is not None:
            return
        self._since = self._clock.now()
        log.log(logging.INFO if self._expected else level, "%s", line, extra=self._extra)


def _why(error: BaseException) -> str:
    """Why the connection ended, without quoting anything the engine sent."""
    if isinstance(error, TimeoutError):
        return "it stopped answering"
    if isinstance(error, FileNotFoundError | ConnectionRefusedError | ConnectionResetError | BrokenPipeError):
        return "it stopped"
    if isinstance(error, OSError):  # the system's words ("permission denied"), not the class's name
        return (error.strerror or "the connection failed").lower()
    return "it closed the connection"
