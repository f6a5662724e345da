"""`TelegramOutage`: Telegram out of reach, said in the log once, not at every retry, and its end said too.

The poll loop retries with a backoff capped at 60 s. Logging each retry at WARNING wrote ~1,440 lines a
day through an outage, and the recovery was logged at INFO (or not at all while polling), so the log's
last Telegram line still read "could not reach Telegram … retrying in 60 s" long after it answered
(newcomer9). Now an outage is one WARNING line when it starts, a reminder each hour it lasts (or when
its reason changes), each retry at INFO (`--verbose`), and one WARNING line when Telegram answers again,
with how long it was away.
"""

from __future__ import annotations

import logging
from datetime import datetime

from klaw.engine.clock import Clock
from klaw.gateway.outage import duration_text

log = logging.getLogger("klaw.channels.telegram")

REMIND_EVERY_SECONDS = 3600.0


class TelegramOutage:
    """One outage at a time: opened by the first failure, closed (and timed) by the next answer."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._since: datetime | None = None
        self._said_at: datetime | None = None
        self._reason = ""

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, reason: str, delay: float, *, retrying: str = "") -> None:
        """A call to Telegram failed for `reason` (words, never a message's text); the next try is in
        `delay` seconds. `retrying` replaces the first line's "retrying" words (the start's)."""
        now = self._clock.now()
        if self._since is None or self._said_at is None:
            self._since = self._said_at = now
            self._reason = reason
            again = retrying or f"retrying in {delay:.0f} s, then up to every 60 s"
            log.warning("telegram: %s; %s (said again hourly while it lasts)", reason, again)
            return
        away = duration_text((now - self._since).total_seconds())
        if reason != self._reason or (now - self._said_at).total_seconds() >= REMIND_EVERY_SECONDS:
            self._said_at, self._reason = now, reason
            log.warning("telegram: still out of reach after %s: %s; retrying in %.0f s", away, reason, delay)
        else:
            log.info("telegram: %s; retrying in %.0f s", reason, delay)

    def reached(self, what: str) -> None:
        """Telegram answered: the end of an outage, if one was said (`what`: the words after "reached
        Telegram again after N min", e.g. "polling as @bot")."""
        if self._since is None:
            return
        away = duration_text((self._clock.now() - self._since).total_seconds())
        self._since = self._said_at = None
        log.warning("telegram: reached Telegram again after %s; %s", away, what)
