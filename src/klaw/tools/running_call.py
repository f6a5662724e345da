"""Which chat's tool call the current code runs inside, for the library to refuse what would wait on itself.

A tool of a program's own (`Klaw(tools=[...])`) may hold the `Klaw` and call it. Asking its own chat
from there would wait for the turn that waits for the tool (the message queued behind it until the
tool timed out, answered later to no one), and closing the engine would wait for itself: `Klaw.ask`
and `Klaw.aclose` read `running_chat()` and refuse at once in words (decision 322). The call's mark is
cleared when the call ends, so a task the tool started and left running is not taken for the tool.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from klaw.store.records import ChatRef


@dataclass(slots=True)
class RunningCall:
    """A tool call under way: what a waiting console shows instead of blaming the model (decision 527)."""

    chat: ChatRef
    name: str = ""
    limit_seconds: float = 0.0  # when it is stopped, counted from `started`
    limit_words: str = "klaw stops a tool call after"  # "sandbox limit" once the tool names its own
    started: float = field(default_factory=time.monotonic)
    running: bool = True


_current: ContextVar[RunningCall | None] = ContextVar("klaw_running_tool_call", default=None)


@contextmanager
def tool_call_of(chat: ChatRef, name: str = "", limit_seconds: float = 0.0) -> Iterator[RunningCall]:
    """Marks the code inside (and tasks and threads it starts, which copy the context) as a tool call of
    `chat`'s turn, until the call ends."""
    call = RunningCall(chat, name, limit_seconds)
    token = _current.set(call)
    try:
        yield call
    finally:
        call.running = False
        _current.reset(token)


def narrow_limit(seconds: float, words: str) -> None:
    """The running call's own, shorter limit (a sandbox run's wall time), for what a console shows."""
    call = _current.get()
    if call is not None and call.running:
        call.limit_seconds, call.limit_words = seconds, words


def running_chat() -> ChatRef | None:
    """The chat whose tool call is running here, or None outside every tool call."""
    call = _current.get()
    return call.chat if call is not None and call.running else None
