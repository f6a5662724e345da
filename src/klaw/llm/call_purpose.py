"""Why the engine is calling a model now: a person's turn, a summary, or a subagent's run.

One model object may answer all three (a library program's `FunctionModel` answers every configured
model id), and the `ChatModel` protocol carries only messages and options. The summarizer and the
subagent runner say what their calls are for with `calling_for`, a context variable, so a model
that wants to know (`FunctionModel`'s `AgentInfo.purpose`) reads it and no signature changes. The
tool loop says the same way which of its turn's model calls this is (`AgentInfo.turn_round`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

CallPurpose = Literal["turn", "summary", "subagent"]

_purpose: ContextVar[CallPurpose] = ContextVar("klaw_call_purpose", default="turn")
_round: ContextVar[int] = ContextVar("klaw_call_round", default=1)


@contextmanager
def calling_for(purpose: CallPurpose) -> Iterator[None]:
    """Model calls made inside the block (and in tasks it starts) are for `purpose`."""
    token = _purpose.set(purpose)
    try:
        yield
    finally:
        _purpose.reset(token)


def current_purpose() -> CallPurpose:
    """What the model call being made now is for (`turn` unless a caller said otherwise)."""
    return _purpose.get()


@contextmanager
def calling_in_round(number: int) -> Iterator[None]:
    """Model calls made inside the block are the `number`th of their turn or run (from 1)."""
    token = _round.set(number)
    try:
        yield
    finally:
        _round.reset(token)


def current_round() -> int:
    """Which model call of its turn or run this is: 1, then one more after each round of tools (1 for a
    call outside a tool loop, such as a summary's)."""
    return _round.get()
