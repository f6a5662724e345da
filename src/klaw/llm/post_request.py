"""A model request's `httpx.Request`, made without `AsyncClient.build_request`'s per-call merging (decision 504).

`build_request` parses the URL again, copies the client's headers and lays the call's over them in a new
`httpx.Headers`, turns the timeout into a new `httpx.Timeout` then a dict, and `httpx.Request` then adds
`Host` and `Content-Length` through `Headers` methods that each re-check every header's encoding: ~0.2 ms of
the event loop's CPU a model call on a loaded machine (`min` of 3,000 runs), for headers that are the same
at every call but the length. `post_request` makes the same request — the same header lines in the same
order (`Host`, the client's, the call's, `Content-Length`), the same body, the same timeout extension — from
header lines kept per client headers and call headers (`_lines`). A client holding cookies or query
parameters gets `build_request` itself, so a cookie a server set is still sent back. The bytes on the wire
are unchanged.

The kept lines include the call's `Authorization` header, so the API key sits in this cache as it sits in
the process's environment and in every request httpx holds; it is still looked up at every call
(`auth_headers`), and a changed key makes new lines.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import httpx

from klaw.llm.endpoint import Endpoint

JSON_CONTENT = {"Content-Type": "application/json"}  # what httpx sets for `json=`
Lines = tuple[tuple[bytes, bytes], ...]


@functools.lru_cache(maxsize=64)
def _timeout(read: float, connect: float) -> dict[str, float | None]:
    return httpx.Timeout(read, connect=min(read, connect)).as_dict()


def timeout_of(endpoint: Endpoint) -> dict[str, float | None]:
    """The request's timeout extension, as `build_request` makes it: `connect_timeout_seconds` at most for
    connecting, `timeout_seconds` between two bytes. Shared between calls: never changed by httpx."""
    return _timeout(endpoint.timeout_seconds, endpoint.connect_timeout_seconds)


@functools.lru_cache(maxsize=64)
def _lines(netloc: bytes, client: Lines, call: tuple[tuple[str, str], ...]) -> Lines:
    """`Host`, then the client's header lines with the call's laid over them (`build_request`'s merge)."""
    merged = httpx.Headers(list(client))
    merged.update(dict(call))
    merged.update(JSON_CONTENT)
    return ((b"Host", netloc), *merged.raw)


def post_request(
    http: httpx.AsyncClient,
    url: httpx.URL,
    headers: Mapping[str, str],
    timeout: dict[str, float | None],
    payload: Mapping[str, Any],
    encoded: bytes | None,
) -> httpx.Request:
    """A POST of `encoded` (JSON bytes; None: `payload`, encoded by httpx) to `url`, as the client's
    `build_request` would make it."""
    if encoded is None or http.cookies or http.params or not url.host:
        sent: dict[str, Any] = {"json": payload} if encoded is None else {"content": encoded}
        sent["headers"] = headers if encoded is None else {**headers, **JSON_CONTENT}
        return http.build_request("POST", url, **sent, extensions={"timeout": timeout})
    lines = _lines(url.netloc, tuple(http.headers.raw), tuple(headers.items()))
    length = (b"Content-Length", str(len(encoded)).encode("ascii"))
    # `stream=` takes the header lines as given (no `Host` or length added: both are in them already)
    request = httpx.Request(
        "POST", url, headers=[*lines, length], stream=httpx.ByteStream(encoded), extensions={"timeout": timeout}
    )
    request.read()  # as a request made with `content=` is: its `content` readable (event hooks, test transports)
    return request
