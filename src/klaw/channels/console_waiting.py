"""What the console's spinner says while a reply is awaited (decision 228).

A bare "thinking…" for two minutes cannot be told from a hang. After a few seconds the spinner says how
long it has waited and how long klaw will wait: the model's `timeoutSeconds` is the longest silence from
the server klaw accepts (a timeout is not retried: klaw/llm/http.py), so a server that took the
connection and never answers ends the wait then, with the turn's apology naming the setting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from rich.status import Status

SHOW_AFTER_SECONDS = 5.0  # a quick answer keeps the plain spinner
TICK_SECONDS = 1.0


def waiting_text(elapsed: float, model_id: str, timeout_seconds: float) -> str:
    """The spinner's text `elapsed` seconds after the message was sent."""
    if elapsed < SHOW_AFTER_SECONDS:
        return "thinking…"
    return f"thinking… {elapsed:.0f} s (klaw gives up after {timeout_seconds:g} s without a word from {model_id})"


async def count_up(
    status: Status, model_id: str, timeout_seconds: float, now: Callable[[], float] = time.monotonic
) -> None:
    """Update `status` every second until cancelled (when the reply arrives)."""
    started = now()
    while True:
        await asyncio.sleep(TICK_SECONDS)
        status.update(waiting_text(now() - started, model_id, timeout_seconds))
