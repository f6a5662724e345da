"""psycopg_pool's own warnings, said at most once a minute in klaw's words.

During an outage the pool logs every failed reconnection and every connection it drops (`psycopg.pool`, at
WARNING), quoting the server's text and the server's host or socket path: a 4 s outage under 20 chats gave
24+ such lines. A program using the library without logging set up printed them raw on stderr (Python's
last-resort handler), and `klaw serve`'s log kept what docs/postgres.md says klaw masks. A filter on that
logger drops them; klaw logs one line of its own instead, at most once a minute. A call that cannot wait
for the server still fails with `StorageUnavailable`, which names the variable holding the DSN, never it.
"""

from __future__ import annotations

import logging
import math
import time

log = logging.getLogger(__name__)
POOL_LOGGER = "psycopg.pool"
EVERY_SECONDS = 60.0


class PoolWarnings(logging.Filter):
    """Drops the pool's WARNING-and-above records; says one worded line for them per `EVERY_SECONDS`."""

    def __init__(self) -> None:
        super().__init__()
        self.last_said = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:  # its INFO/DEBUG lines show only where a person asked for them
            return True
        now = time.monotonic()
        if now - self.last_said >= EVERY_SECONDS:
            self.last_said = now
            log.warning(
                "the PostgreSQL connection pool lost a connection or could not open one (the server stopped,"
                " restarted or cannot be reached): it keeps trying, and a call that cannot wait fails naming"
                " database.urlEnv's variable (psycopg's own words are not logged: they name the server's host)"
            )
        return False


POOL_WARNINGS = PoolWarnings()


def quiet_pool_warnings() -> None:
    """Put the filter on psycopg's pool logger, once per process (every store shares the logger)."""
    logger = logging.getLogger(POOL_LOGGER)
    if POOL_WARNINGS not in logger.filters:
        logger.addFilter(POOL_WARNINGS)
