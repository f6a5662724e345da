"""Ctrl-C while `klaw chat` waits for a turn (the spinner) cancels that turn, as most chat CLIs do; a second
Ctrl-C before the cancel is done quits, as any Ctrl-C did before (the reply in flight finished, exit 130).

Before, the first Ctrl-C stopped the whole chat and waited for the reply in flight: a 20 s tool run
(`sleep 20`) held the person 20 s and then dropped them at the shell, with no way to cancel just the turn
(newcomer20). The cancel is `/forget`'s stop without the forget (`MessageProcessor.turn_stopped`): the
turn's task is cancelled (a tool's program killed with its process group, bounded_process.py), its
exchange closed so no later start answers it again, the person's message kept in the chat, and the
turn's answer is a line saying it was cancelled (stopped_turns.CANCELLED); the prompt comes back.

At the prompt Ctrl-C is a key of prompt_toolkit's (console_prompt.py: clears a typed line, leaves from
an empty one); here the terminal is in cbreak mode with signals kept (console_keys.py), so Ctrl-C is a
SIGINT. The handler of the moment (asyncio.Runner's: it cancels the main task) is put back after, and
is what a second Ctrl-C calls.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

CANCELLING = "cancelling this turn… (Ctrl-C again to quit klaw chat)"


@contextmanager
def ctrl_c_cancels(cancel: Callable[[], None]) -> Iterator[None]:
    """While the block runs, the first SIGINT calls `cancel` on the event loop; the next one goes to the
    handler the block found. Outside the main thread (no signals there) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    before: Any = signal.getsignal(signal.SIGINT)
    pressed = 0

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal pressed
        pressed += 1
        if pressed == 1:
            loop.call_soon_threadsafe(cancel)
        elif callable(before):
            before(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
