"""A person's Ctrl-C on a chat's running turn: the turn stopped as `/forget` stops it, nothing forgotten.

One stop for both `klaw chat`s: in process the console calls it through `Engine.cancel_turn`
(channels/console.py); attached to `klaw serve` or `klaw engine`, the terminal asks the socket's `cancel_turn`
query (`{"channel", "chat_id"}` → `{"cancelled": bool}`) for the chat it is attached to (decision 496). The
turn's task is cancelled (a tool's program killed with its process group), the waiting batches taken
out, each exchange closed as `failed` (never answered again at a start), the person's message kept, and
each stopped batch answered with stopped_turns.CANCELLED: the reply the terminal waits for, routed as any.
`cancelled` is false when the chat had nothing under way (the reply came as the key was pressed): nothing
is stopped and the reply stands. An action, not a reading, like the `forget` and `memory_tool` queries: the
socket is the person's own (0600).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from klaw.engine.processor import MessageProcessor
from klaw.engine.queries import named_chat
from klaw.store.records import ChatRef


async def cancel_turn(processor: MessageProcessor, chat: ChatRef) -> bool:
    """Stop what `chat` has under way, told as cancelled; False when nothing was."""
    if not processor.has_under_way(chat):
        return False
    async with processor.turn_stopped(chat) as stopped:
        stopped.cancelled = True
    return bool(stopped)


async def cancel_turn_answer(processor: MessageProcessor, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `cancel_turn` query's answer; a chat not named as `channel` and `chat_id` is a `QueryError`."""
    return {"cancelled": await cancel_turn(processor, named_chat(params))}
