"""A search text that names one of the people a transcript quotes ranks that person's own messages first.

A chat imported or bridged from a conversation between people writes who said each line before it:
"Melanie: we went camping at the lake". Asked "What activities does Melanie partake in?", words and
meaning find lines about activities by anyone, and lines that mention Melanie; what was asked for is
what Melanie herself said. So when the search text names exactly one of the speakers of the best
hits, each hit that person said has its score multiplied by 1 + `speakerWeight` (decision 255).

- **Who said a message** is the name its text opens with, before a colon: one to three capitalised
  words ("Melanie: …", "Anna Maria: …"), at most `MAX_NAME_CHARS`. A message without one has no
  speaker. klaw's own chats with its agent write no names into the text, so there the step changes
  nothing; it acts only on text that names its speakers.
- **Naming a speaker** is the search text holding the name as a whole word, as written (capitals
  too: "Note: …" is no one a question about a note names). A text naming two of them ("What do Jon
  and Gina both have in common?") is about both: nothing changes.
- **Only the order of the best hits** changes, never which they are (as with `query_coverage`), so
  auto-RAG's gate judges the same hits with or without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_NAME_CHARS = 40  # a longer opening before a colon is a sentence, not a name
_NAME_WORD = r"[A-Z][\w'’-]*"
_OPENING_CHARS = 4 * MAX_NAME_CHARS  # where an opening name can be: a little space, the name, the colon
_OPENING = re.compile(rf"\s*({_NAME_WORD}(?: {_NAME_WORD}){{0,2}}):\s")


def speaker_of(text: str) -> str | None:
    """The name `text` opens with before a colon ("Melanie: …" → "Melanie"), else None."""
    found = _OPENING.match(text[:_OPENING_CHARS])  # not the whole of a megabyte reply: a name opens it
    if found is None or len(found.group(1)) > MAX_NAME_CHARS:
        return None
    return found.group(1)


def named_speaker(text: str, speakers: Iterable[str | None]) -> str | None:
    """The one of `speakers` that `text` names as a whole word; None when it names none or several."""
    named = {name for name in speakers if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)}
    return named.pop() if len(named) == 1 else None


def speaker_factor(weight: float, named: str | None, speaker: str | None) -> float:
    """1 + `weight` for a message said by `named` (its `speaker_of`), else 1."""
    if weight <= 0 or named is None:
        return 1.0
    return 1.0 + weight if speaker == named else 1.0
