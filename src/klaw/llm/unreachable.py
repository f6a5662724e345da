"""Why a server did not answer, in words a person can act on, shared by the chat's start-up check
(`klaw.llm.preflight`) and every model call (`klaw.llm.http`): the same failure once read
"connection refused (nothing listens at that address and port)" before a chat and "ConnectError"
when a turn met it."""

from __future__ import annotations

import errno
import socket
import ssl

import httpx


def what_happened(exc: httpx.HTTPError, *, seconds: float) -> str:
    """Why a server did not answer, in words ("connection refused: nothing listens there"), not the
    exception's class ("ConnectError"), which told a newcomer nothing about what to do. `seconds` is
    how long the caller waited, said when it timed out."""
    if isinstance(exc, httpx.TimeoutException):
        return f"it did not answer within {seconds:g} seconds (timed out)"
    cause = _os_cause(exc)
    if isinstance(cause, socket.gaierror):
        return "the host name was not found (a typo in the address, or no network)"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused (nothing listens at that address and port)"
    if isinstance(cause, ssl.SSLError):
        return f"the TLS handshake failed ({cause.reason or cause})"
    if cause is not None and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return "the network or host is unreachable from here"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection without an answer"
    if cause is not None and cause.strerror:
        return f"could not connect ({cause.strerror.lower()})"
    return f"could not connect ({exc})" if str(exc) else "could not connect"


def broken_off(exc: httpx.TransportError) -> str:
    """Why a response stopped partway, in words: "the server closed the connection before its answer was
    complete", not httpx's class ("RemoteProtocolError"), which a person cannot act on."""
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection before its answer was complete"
    cause = _os_cause(exc)
    if isinstance(cause, ConnectionResetError):
        return "the server reset the connection before its answer was complete"
    if cause is not None and cause.strerror:
        return f"the connection failed before the answer was complete ({cause.strerror.lower()})"
    return "the connection failed before the answer was complete"


def url_problem(exc: Exception) -> str:
    """What is wrong with a base URL httpx refused, in words rather than its class."""
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "it does not start with http:// or https://"
    return "it cannot be read as a URL"


def _os_cause(exc: BaseException) -> OSError | None:
    """The operating system's error under httpx's wrapping (httpx → httpcore → anyio's "All connection
    attempts failed" → ConnectionRefusedError): the first one with an errno, else the first OSError."""
    found: list[OSError] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            found.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    specific = [error for error in found if error.errno is not None or isinstance(error, ssl.SSLError)]
    chosen = specific or found
    return chosen[0] if chosen else None
