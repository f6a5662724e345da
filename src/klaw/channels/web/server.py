"""uvicorn inside the gateway's event loop: bound by us (so port 0 works), no signal handlers, no access log.

The host process (`klaw gateway`, `klaw serve`, a test) owns the signals; uvicorn's own handlers
would swallow SIGTERM. The access log is off because request lines carry search text and paths
that name chats. Stopping is bounded: connections get `grace_seconds`, then are cut. The page's
event streams must be closed first (`EventHub.close`), or they take the whole grace.
How uvicorn is embedded is `klaw.embedded_http`; this fixes the web page's choices.
"""

from __future__ import annotations

from typing import Any

from klaw.embedded_http import EmbeddedHttpServer

# Well below the usual 1024 open files per process, so a flood of web connections leaves room for
# the engine socket, the database and the scheduler (see klaw.embedded_http on slow clients).
MAX_CONNECTIONS = 256
HEAD_TIMEOUT_SECONDS = 20.0


class EmbeddedServer(EmbeddedHttpServer):
    """`start` binds (SO_REUSEADDR: a restarted gateway gets its fixed port back while the last run's
    connections linger) and returns once serving, raising OSError when the port is taken or the
    address bad; `port` is then the bound port; `stop` is bounded by `grace_seconds`."""

    def __init__(self, app: Any, host: str, port: int, *, grace_seconds: float = 2.0) -> None:
        super().__init__(
            app,
            host,
            port,
            grace_seconds=grace_seconds,
            reuse_address=True,
            name="web-server",
            max_connections=MAX_CONNECTIONS,
            head_timeout_seconds=HEAD_TIMEOUT_SECONDS,
        )
