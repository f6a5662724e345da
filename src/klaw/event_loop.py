"""The event loop a long-running klaw process runs on: uvloop where it is installed, else asyncio's own.

With 50 chats at once the engine's event loop is the busiest thread; uvloop (libuv, in C) does the same
work (callbacks, sockets, timers, waking from worker threads) for ~0.4 ms less of that thread's CPU a turn
(decision 220). It is a dependency on Linux and macOS, where it has wheels (x86_64 and aarch64);
elsewhere, or if it fails to import, asyncio's loop runs the same code. Short commands keep `asyncio.run`:
they spend nothing on the loop. Imports nothing else of klaw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop's loop when uvloop imports."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def loop_name() -> str:
    """The running loop's kind, "uvloop" or "asyncio", for benches and reports."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
