"""A turn's context never over its budget, whatever a message's size (adversary28, decision 488).

The window is fitted to what the fixed layers leave (`context_builder.fit_newest`), but a turn's own messages,
and the tool records of a round a crash cut off, always go in: a message pasted whole, or typed into the log
by hand (10 MB: 2,502,451 tokens for a 7,372-token model, which answered with an error), went to the model as
it was. The largest of the conversation's messages are cut now, each at a line that says so, until the
context fits; the person is told first that their message is over the budget (message_budget.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

from klaw.llm.messages import ChatMessage, ToolSpec
from klaw.llm.tokens import approximate_token_count

SAFETY_MARGIN = 0.9  # the share of a model's budget a context is built in (approximate token counts need the margin)
MESSAGE_OVERHEAD_TOKENS = 4  # role and framing per message
MIN_ROOM_TOKENS = 256  # what the conversation keeps even when the fixed layers alone fill the budget
MARK = (
    "\n\n[klaw cut this message here: its {total:,} characters are more than the model's context holds;"
    " the model sees the first {kept:,}]"
)


def tools_tokens(tools: Sequence[ToolSpec]) -> int:
    """The whole `tools` array's tokens, as sent (here, not in the builder: `klaw config check` counts them without
    loading what the builder imports, numpy among it: decision 500)."""
    return approximate_token_count(json.dumps([t.to_wire() for t in tools])) if tools else 0


def cut_to_fit(
    messages: Sequence[ChatMessage], first: int, room: int, tokens: Callable[[ChatMessage], int]
) -> list[ChatMessage]:
    """`messages`, those from `first` on (the conversation after the fixed layers) cut, largest first, until
    their `tokens` fit `room` (at least `MIN_ROOM_TOKENS`); the fixed layers are left as they are."""
    out = list(messages)
    room = max(room, MIN_ROOM_TOKENS)
    while (over := sum(tokens(m) for m in out[first:]) - room) > 0:
        index = max(range(first, len(out)), key=lambda i: len(out[i].content or ""), default=None)
        if index is None:
            break
        text = out[index].content or ""
        shown = text[: _chars_for(text, approximate_token_count(text) - over - 40)]  # 40: the mark's own tokens
        cut = shown + MARK.format(total=len(text), kept=len(shown))
        if len(cut) >= len(text):
            break  # nothing left to cut: every message is as short as a mark
        out[index] = dataclasses.replace(out[index], content=cut)
    return out


def _chars_for(text: str, token_count: int) -> int:
    """How many of `text`'s first characters make at most `token_count` tokens (approximate_token_count's rule:
    4 ASCII characters a token, 2 for others; the slower count only for text that is not all ASCII)."""
    if token_count <= 0:
        return 0
    if text.isascii():
        return token_count * 4
    low, high = 0, min(len(text), token_count * 4)
    while low < high:
        middle = (low + high + 1) // 2
        if approximate_token_count(text[:middle]) <= token_count:
            low = middle
        else:
            high = middle - 1
    return low
