"""A small brake on guessing the web token: at most `FAILURES` wrong tokens per client per `WINDOW_SECONDS`.

The token has 256 bits, so guessing it is hopeless anyway; the limit keeps a script from hammering
the login form (and filling the log) and makes a mistyped-token loop obvious. Past the limit the
client gets 429 with `Retry-After` for wrong tokens until its oldest failure leaves the window; the
right token is checked first and never refused. Clients are told apart by address (on loopback
that is every user of the machine, which is why the limit must not lock the right token out).
Memory is bounded: idle clients are forgotten, and at most `MAX_CLIENTS` are tracked.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

FAILURES = 5
WINDOW_SECONDS = 60.0
MAX_CLIENTS = 10_000


class LoginLimiter:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> int | None:
        """Seconds this client must wait before trying again, or None if it may try now."""
        failures = self._recent(client)
        if len(failures) < FAILURES:
            return None
        return max(1, math.ceil(failures[0] + WINDOW_SECONDS - self._clock()))

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= MAX_CLIENTS:
            for known in list(self._failures):
                self._recent(known)
            if len(self._failures) >= MAX_CLIENTS:
                self._failures.pop(next(iter(self._failures)))
        self._failures.setdefault(client, deque(maxlen=FAILURES)).append(self._clock())

    def _recent(self, client: str) -> deque[float]:
        failures = self._failures.get(client, deque())
        while failures and failures[0] + WINDOW_SECONDS <= self._clock():
            failures.popleft()
        if not failures:
            self._failures.pop(client, None)
        return failures
