"""Nothing reads a request body before the sender is let in, and no body grows past a cap.

FastAPI parses a handler's body before its dependencies run, so a session check written as a
dependency came too late: anyone who could reach the port could make the gateway read and parse
a body of any size (100 MB took it from 91 to 287 MB). This ASGI middleware runs first for every
request that may carry a body: `admit` looks at the headers and cookies only and may answer at
once (401, the login form, 429); then a `Content-Length` over the cap is refused with 413 unread,
and a body without one is read only up to the cap. What passes is handed on whole, so handlers
read it as usual.

A body has `BODY_SECONDS` to arrive whole, or is answered 408 and its connection closed: a head
announcing a megabyte and then nothing (or a byte every few seconds) held a connection for good, and
260 of them, from anyone who could fetch the login form's cookie, took every connection the server
keeps (decision 366). A body cut off (the client went away) is answered too, though nobody reads it:
returning without a response made Starlette's middleware log a 41-line "No response returned."
traceback for what is only a closed connection (one DEBUG line now).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from klaw.ascii_digits import digits

MAX_BODY_BYTES = 1 << 20
"""As large as one engine frame: a message that would not fit one could not be sent anyway."""
BODY_SECONDS = 30.0
"""A whole 1 MiB body in this time is 35 KB/s: any real link, even a phone's; a deliberately slow one is cut."""
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
BODY_KEY = "klaw.body"
"""Where the body read is kept in the request's scope, for a refusal that must look at it again (app.py)."""

log = logging.getLogger(__name__)

Admit = Callable[[Request], Response | None]


class BodyGuard:
    def __init__(self, app: ASGIApp, admit: Admit, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._app = app
        self._admit = admit
        self._max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in BODYLESS_METHODS:
            await self._app(scope, receive, send)
            return
        refusal = self._admit(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        length = Request(scope).headers.get("content-length")
        if length is not None and (not digits(length) or int(length) > self._max):
            await self._too_large(scope, receive, send)
            return
        seconds = BODY_SECONDS  # read here, so a test can shorten it
        body = bytearray()
        try:
            async with asyncio.timeout(seconds):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        log.debug("a request body was cut off after %d bytes: the client went away", len(body))
                        await _refuse(400, "the request body was cut off before its end; send it again", scope, send)
                        return
                    body += message.get("body", b"")
                    if len(body) > self._max:
                        await self._too_large(scope, receive, send)
                        return
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            detail = f"the request body did not arrive within {seconds:g} seconds; send it whole, at once"
            await _refuse(408, detail, scope, send)
            return
        scope[BODY_KEY] = whole = bytes(body)
        await self._app(scope, _replay(whole, receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the request is larger than {self._max // 1024} KiB; send a shorter message"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)


async def _refuse(status: int, detail: str, scope: Scope, send: Send) -> None:
    """An answer that ends the connection: the rest of a body that stalled or broke off is never read."""
    response = JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})
    await response(scope, _gone, send)


async def _gone() -> Message:
    return {"type": "http.disconnect"}


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the buffered body once, then whatever the server says next (a disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
