"""Ctrl-C in `klaw chat` at a terminal (in process and attached alike), through one SIGINT handler held for the
whole chat: while a turn's reply is awaited the first Ctrl-C cancels that turn, as most chat CLIs do, and a
second one before the cancel is done quits (the handler found, asyncio.Runner's: exit 130); at the prompt,
and from the end of a turn's wait until the prompt takes the terminal, it is the prompt's Ctrl-C (clears a
typed line, leaves from an empty one: console_prompt.py).

Before (decision 490), a handler of the turn's own was put in front of asyncio.Runner's for the spinner
and taken away after, and every prompt put prompt_toolkit's in front of that (`handle_sigint`, through
the event loop's signal handling) and took it away again: three owners swapped between a cancelled turn
and the next prompt, and a Ctrl-C pressed as the prompt took the terminal (the terminal in its own line
mode, echoing `^C`) could be lost, the next press working (CI110; decision 496). Now the chat's handler is
the only one from its first prompt to its end; prompts are asked with `handle_sigint=False`, and a Ctrl-C
that comes as a signal while a prompt is up (the terminal in line mode while prompt_toolkit prints
something above the prompt) or on its way is given to that prompt as its Ctrl-C key. In the prompt's raw
mode Ctrl-C is a key, not a signal, as before.

The cancel itself is engine/turn_cancel.py's `cancel_turn` (`/forget`'s stop without the forget, the answer
stopped_turns.CANCELLED): in process through `Engine.cancel_turn`, attached through the socket's query.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # prompt_toolkit is imported where a prompt is drawn, never by a piped chat (decision 316)
    from prompt_toolkit.application import Application
    from rich.status import Status

T = TypeVar("T")

CANCELLING = "cancelling this turn… (Ctrl-C again to quit klaw chat)"


class ChatCtrlC:
    """What Ctrl-C means in this chat at each moment; `installed` makes it the process's SIGINT handler."""

    def __init__(self) -> None:
        self._before: Any = None
        self._cancel: Callable[[], None] | None = None  # a turn's reply is awaited
        self._presses = 0  # Ctrl-Cs while it is
        self._toward_prompt = False  # a turn's wait ended: the next Ctrl-C is the next prompt's
        self._owed = False  # a Ctrl-C came before that prompt took the terminal
        self._app: Application[Any] | None = None  # the prompt up

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The chat's handler for the block, the one found put back after. Outside the main thread (no
        signals there) nothing changes. Through the event loop, which calls it once for each signal that
        came (two presses before Python ran a handler of its own were one call: decision 490's note)."""
        global _current
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        self._before = signal.getsignal(signal.SIGINT)
        loop.add_signal_handler(signal.SIGINT, self._pressed)
        _current = self
        try:
            yield
        finally:
            _current = None
            loop.remove_signal_handler(signal.SIGINT)  # leaves Python's default handler: the one found back
            if self._before is not None:
                signal.signal(signal.SIGINT, self._before)

    @contextmanager
    def cancels(self, cancel: Callable[[], None]) -> Iterator[None]:
        """While a turn's reply is awaited: the first Ctrl-C calls `cancel` on the event loop, the next quits."""
        self._cancel, self._presses, self._toward_prompt = cancel, 0, False
        if self._owed:  # pressed as the message went (its prompt closing): it cancels this turn
            self._owed, self._presses = False, 1
            asyncio.get_running_loop().call_soon(cancel)
        try:
            yield
        finally:
            self._cancel = None
            self._toward_prompt = True

    @contextmanager
    def at_prompt(self, app: Application[Any]) -> Iterator[Callable[[], None]]:
        """Around a prompt; yields what its `pre_run` calls, when it takes keys: a Ctrl-C owed is pressed then."""

        def started() -> None:
            self._app, self._toward_prompt = app, False
            if self._owed:
                self._owed = False
                press_ctrl_c(app)

        try:
            yield started
        finally:
            self._app = None

    def _pressed(self) -> None:
        """One Ctrl-C, on the event loop."""
        if self._cancel is not None:
            self._presses += 1
            if self._presses == 1:
                self._cancel()
                return
        elif self._app is not None or self._toward_prompt:
            self._for_the_prompt()
            return
        if callable(self._before):  # asyncio.Runner's: the main task cancelled, the chat quits (exit 130)
            self._before(signal.SIGINT, None)
        else:
            raise KeyboardInterrupt

    def _for_the_prompt(self) -> None:
        app = self._app
        if app is not None and app.future is not None and not app.future.done():
            press_ctrl_c(app)
        else:  # the prompt is on its way (it gets it as it starts), or just closed (the turn it sent gets it)
            self._owed = True


def start_cancelling(
    status: Status, ticker: asyncio.Task[None], cancels: set[asyncio.Task[T]], cancel: Coroutine[Any, Any, T]
) -> None:
    """The first Ctrl-C while a reply is awaited, in process and attached alike: the waiting line stops counting
    and says a cancel is under way, and `cancel` runs as a task `cancels` holds until it ends (the event loop
    keeps only a weak reference to a task)."""
    ticker.cancel()
    status.update(CANCELLING)
    task = asyncio.create_task(cancel)
    cancels.add(task)
    task.add_done_callback(cancels.discard)


def press_ctrl_c(app: Application[Any]) -> None:
    """Ctrl-C given to a prompt as if typed there, whatever mode the terminal is in."""
    from prompt_toolkit.key_binding import KeyPress
    from prompt_toolkit.keys import Keys

    app.key_processor.feed(KeyPress(Keys.ControlC, "\x03"))
    app.key_processor.process_keys()


_current: ChatCtrlC | None = None


def current() -> ChatCtrlC | None:
    """The chat's handler while one is installed (the prompts ask it: console_prompt.py)."""
    return _current
