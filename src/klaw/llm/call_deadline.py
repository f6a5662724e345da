"""A whole model call's deadline (a model's `totalTimeoutSeconds`, decision 298).

httpx's timeouts are per read: a server that sends one byte every half second (a stuck proxy, a hostile or
broken server) never lets a read wait `timeoutSeconds`, and the turn, its chat and its LLM slot stayed held
forever. The call is ended at its deadline instead, with an `LlmTimeoutError` the turn's apology quotes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from klaw.llm.endpoint import Endpoint
from klaw.llm.errors import LlmError, LlmTimeoutError


def deadline_of(endpoint: Endpoint) -> float | None:
    """When a call starting now must be over (the event loop's clock), or None when it has no limit."""
    if endpoint.total_timeout_seconds is None:
        return None
    return asyncio.get_running_loop().time() + endpoint.total_timeout_seconds


@asynccontextmanager
async def within_deadline(endpoint: Endpoint, deadline: float | None) -> AsyncIterator[None]:
    """The body, ended at `deadline` with `LlmTimeoutError` naming `totalTimeoutSeconds`. Around each wait of a
    stream, never across a `yield`: the caller's code runs there, and the deadline must not cancel it."""
    try:
        async with asyncio.timeout_at(deadline):
            yield
    except TimeoutError as exc:  # the httpx timeouts inside are LlmErrors already: this is the deadline
        raise too_long(endpoint) from exc


def too_long(endpoint: Endpoint) -> LlmError:
    return endpoint.error(
        LlmTimeoutError,
        f"the answer was not complete after {endpoint.total_timeout_seconds:g} s (the server kept the call open,"
        " sending too little to finish it)",
        f"The server may be stuck or far too slow; check it, or raise totalTimeoutSeconds under {endpoint.section}.",
    )
