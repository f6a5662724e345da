"""Which chat's tool call the current code runs inside, for the library to refuse what would wait on itself.

A tool of a program's own (`Klaw(tools=[...])`) may hold the `Klaw` and call it. Asking its own chat
from there would wait for the turn that waits for the tool (the message queued behind it until the
tool timed out, answered later to no one), and closing the engine would wait for itself: `Klaw.ask`
and `Klaw.aclose` read `running_chat()` and refuse at once in words (decision 322). The call's mark is
cleared when the call ends, so a task the tool started and left running is not taken for the tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from klaw.store.records import ChatRef


@dataclass(slots=True)
class _Call:
    chat: ChatRef
    running: bool = True


_current: ContextVar[_Call | None] = ContextVar("klaw_running_tool_call", default=None)


@contextmanager
def tool_call_of(chat: ChatRef) -> Iterator[None]:
    """Marks the code inside (and tasks and threads it starts, which copy the context) as a tool call of
    `chat`'s turn, until the call ends."""
    call = _Call(chat)
    token = _current.set(call)
    try:
        yield
    finally:
        call.running = False
        _current.reset(token)


def running_chat() -> ChatRef | None:
    """The chat whose tool call is running here, or None outside every tool call."""
    call = _current.get()
    return call.chat if call is not None and call.running else None
