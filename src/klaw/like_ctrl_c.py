"""Signals that stop a klaw command as Ctrl-C does: `timeout` and systemd send SIGTERM, a closed terminal SIGHUP.
Written once for the commands that stop in order on Ctrl-C (`klaw serve`/`engine`/`gateway` while they start,
cli/stopping.py; a bench's PostgreSQL schema dropped on the way out, bench/bench_store.py), which each had a
copy (decision 474); `bench` may not import `cli`, so it lives here. Imports nothing of klaw.

The signal calls SIGINT's handler of the moment rather than raising KeyboardInterrupt itself: before an event
loop that is Python's (it raises KeyboardInterrupt), under `asyncio.run` asyncio's, which cancels the main task,
so the command unwinds through its own awaits and closes its store; a KeyboardInterrupt raised wherever the main
thread happened to be (inside the event loop's own code) left asyncio.run's clean-up waiting on a store that was
never closed, and one SIGHUP'd bench ran past two minutes (CI92).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType


@dataclass
class Came:
    """Whether one of the signals came while the block ran (a stop asked, not a Ctrl-C typed)."""

    asked: bool = False


@contextmanager
def stopped_like_ctrl_c(*signals: signal.Signals) -> Iterator[Came]:
    """While the block runs, each of `signals` does what Ctrl-C does (SIGINT's handler of the moment, or a
    KeyboardInterrupt where SIGINT is ignored or left to the system); the handlers they had are put back after.
    Off the main thread, where Python sets no handler, nothing changes."""
    came = Came()
    if threading.current_thread() is not threading.main_thread():
        yield came
        return

    def as_ctrl_c(_number: int, frame: FrameType | None) -> None:
        came.asked = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    previous = {number: signal.signal(number, as_ctrl_c) for number in signals}
    try:
        yield came
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
