"""An approval question's code block as Telegram shows code: a `pre` entity, not the ``` lines around it.

The question (engine/approval_question.py) puts the call's arguments between fence lines, which the console
and the web page draw as a code block. Telegram gets klaw's text plain, with entities for what klaw itself
marks (decision 408), so the fences came through as raw backticks (newcomer23: "```\\npath: tg.txt…```").
The fence lines are taken out and what they held is marked `pre`: one monospace block, the arguments in it
character for character (an entity, so nothing in the arguments can mark anything up; decision 525).
Offsets are in UTF-16 units, as Telegram counts them.
"""

from __future__ import annotations

import re

from telegram import MessageEntity

from klaw.channels.telegram_split import utf16_length

# A fence alone on its line (three or more backticks, longer when the arguments hold a run: approval_question.py),
# the block, and the same fence closing it alone on its line.
_BLOCK = re.compile(r"^(`{3,})\n(.*?)\n\1$", re.MULTILINE | re.DOTALL)


def code_as_entities(text: str) -> tuple[str, list[MessageEntity]]:
    """`text` without its fence lines, and a `pre` entity over each block they held."""
    parts: list[str] = []
    entities: list[MessageEntity] = []
    at = 0
    for block in _BLOCK.finditer(text):
        parts.append(text[at : block.start()])
        offset = utf16_length("".join(parts))
        code = block.group(2)
        parts.append(code)
        if code:
            entities.append(MessageEntity(MessageEntity.PRE, offset, utf16_length(code)))
        at = block.end()
    parts.append(text[at:])
    return "".join(parts), entities
