"""The web page answers only to its own names: a request whose `Host` is another name is refused first.

DNS rebinding: a page on `evil.example` has its name re-pointed at 127.0.0.1, and the browser, still
thinking it talks to evil.example, lets that page's script read klaw's answers (same origin to it:
its `Origin` and `Host` agree, so the Origin check passes). Its cookies are evil.example's, not the
real page's, so the API stays closed, but the login form and every unauthenticated answer were
reachable. A rebound request always names the attacker's domain in `Host`; this ASGI middleware,
outermost, refuses any `Host` that is not `localhost`, an IP address (no DNS answer can put one
there), the configured listen host, or a name in `channels.web.allowedHosts` (a reverse proxy's),
before any other middleware, route or body reading runs (decision 358). The port is not compared:
a rebinding page uses the very port it targets, so only the name tells it apart.

Names are compared as DNS sends them: one trailing dot dropped (`klaw.example.org.` is the same
name), a Unicode entry in `allowedHosts` as its IDNA form, which is what a browser puts in `Host`
(`bücher.example` arrives as `xn--bcher-kva.example`; adversary13).

Starlette's TrustedHostMiddleware does the same comparison, but reads `[::1]:8765` as the host `[`
and answers only "Invalid host header"; a refused person needs the address to open instead.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

ALWAYS_ALLOWED = frozenset({"localhost"})
SHOWN_HOST_CHARS = 100


def host_name(header: str | None) -> str | None:
    """The name in a `Host` header, lower-cased, an IPv6 address without its brackets; None when there
    is none or it is not a host with an optional port."""
    if not header or any(char in header for char in "@/\\?# \t"):
        return None
    try:
        parts = urlsplit("//" + header)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in 0-65535
    except ValueError:  # the port, or an unclosed IPv6 bracket
        return None
    return parts.hostname or None


def _is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def comparable(name: str) -> str:
    """`name` as the guard compares it: lower-cased, without brackets or one trailing dot, in IDNA form."""
    name = name.lower().strip("[]").removesuffix(".")
    if name.isascii():
        return name
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:  # not a name IDNA can write: compared as written (a browser cannot send it)
        return name


class HostGuard:
    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]) -> None:
        self._app = app
        self._allowed = ALWAYS_ALLOWED | {comparable(name) for name in allowed_hosts}

    def allows(self, header: str | None) -> bool:
        name = host_name(header)
        return name is not None and ((name := comparable(name)) in self._allowed or _is_ip_address(name))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        header = Headers(scope=scope).get("host")
        if self.allows(header):
            await self._app(scope, receive, send)
            return
        response = PlainTextResponse(_refusal(header, scope.get("server")), status_code=400)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"
        await response(scope, receive, send)


def _refusal(header: str | None, server: tuple[str, int | None] | None) -> str:
    """What a person (or a script) reads: the name it used, the address to open, the key for another name."""
    if header:
        shown = header if len(header) <= SHOWN_HOST_CHARS else header[:SHOWN_HOST_CHARS] + "…"
        said = f"this request named the host {shown!r}"
    else:
        said = "this request named no host (no Host header)"
    where = "the address klaw serve printed"
    if server is not None and server[1] is not None:
        address = f"[{server[0]}]" if ":" in server[0] else server[0]
        where = f"http://{address}:{server[1]}/"
    return (
        f"klaw's web page answers only to its own address, and {said}.\n"
        f"Open {where} instead. To reach the page by that name (your own reverse proxy in front of it),"
        " add the name to channels.web.allowedHosts in engine.yaml and restart klaw.\n"
    )
