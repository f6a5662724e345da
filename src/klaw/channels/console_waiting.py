"""What the console's spinner says while a reply is awaited (decision 228).

A bare "thinking…" for two minutes cannot be told from a hang. After a few seconds the spinner says how
long it has waited and how long klaw will wait: the model's `timeoutSeconds` is the longest silence from
the server klaw accepts (a timeout is not retried: klaw/llm/http.py), so a server that took the
connection and never answers ends the wait then, with the turn's apology naming the setting. While a
tool call runs, the wait is the tool's, not the model's: the spinner names it and its own limit
("running code_execute… 23 s (sandbox limit 30 s)", decision 527), in process from the engine's tool
registry, attached from the engine's `running_tool` query.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rich.status import Status

from klaw.gateway.link import EngineUnavailable, QueryFailed


class RunningCall(Protocol):
    """A tool call under way (tools/running_call.py's, which channels may not import)."""

    name: str
    started: float
    limit_seconds: float
    limit_words: str
    running: bool


Doing = Callable[[], RunningCall | None]  # the tool call under way in the chat's turn, if any
Ask = Callable[[str, dict[str, Any]], Awaitable[Any]]  # a query to the engine (`Gateway.query`)


@dataclass(slots=True)
class _Seen:
    name: str
    started: float
    limit_seconds: float
    limit_words: str
    running: bool = True


class AskedDoing:
    """The running engine's `running_tool` answer, for an attached terminal's spinner (decision 527): asked
    each tick, at most a tick's wait; an engine down, slow or older than the query leaves the model's words."""

    def __init__(self, ask: Ask, params: dict[str, Any]) -> None:
        self._ask = ask
        self._params = params
        self._known = True
        self.now: _Seen | None = None

    async def refresh(self) -> None:
        if not self._known:
            return
        try:
            async with asyncio.timeout(TICK_SECONDS):
                found = await self._ask("running_tool", self._params)
        except (TimeoutError, EngineUnavailable, QueryFailed) as exc:
            self._known = not str(exc).startswith("unknown query")
            self.now = None
            return
        tool = found.get("tool") if isinstance(found, dict) else None
        if not isinstance(tool, str):
            self.now = None
            return
        started = time.monotonic() - float(found.get("seconds") or 0)
        self.now = _Seen(tool, started, float(found.get("limit_seconds") or 0), str(found.get("limit_words") or ""))


SHOW_AFTER_SECONDS = 5.0  # a quick answer keeps the plain spinner
TICK_SECONDS = 1.0


def waiting_text(
    elapsed: float, model_id: str, timeout_seconds: float, running: RunningCall | None = None, now: float = 0.0
) -> str:
    """The spinner's text `elapsed` seconds after the message was sent; while a tool call runs, that call
    and its own limit (`now`: the monotonic clock): the model is not what is waited for then (decision 527)."""
    if running is not None and running.running:
        took = max(0.0, now - running.started)
        limit = f" ({running.limit_words} {running.limit_seconds:g} s)" if running.limit_seconds else ""
        return f"running {running.name}…" + (f" {took:.0f} s{limit}" if elapsed >= SHOW_AFTER_SECONDS else "")
    if elapsed < SHOW_AFTER_SECONDS:
        return "thinking…"
    return f"thinking… {elapsed:.0f} s (klaw gives up after {timeout_seconds:g} s without a word from {model_id})"


async def count_up(
    status: Status,
    model_id: str,
    timeout_seconds: float,
    now: Callable[[], float] = time.monotonic,
    doing: Doing | None = None,
) -> None:
    """Update `status` every second until cancelled (when the reply arrives)."""
    started = now()
    while True:
        await asyncio.sleep(TICK_SECONDS)
        at = now()
        running = doing() if doing is not None else None
        status.update(waiting_text(at - started, model_id, timeout_seconds, running, at))
