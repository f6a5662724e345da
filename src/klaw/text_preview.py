"""`preview`: what a person typed, quoted back in a sentence, on one line and cut with an ellipsis.

A name klaw does not know (`/model <5,000 characters>`, an unknown `/command`) was quoted whole: three
Telegram messages for one refusal (adversary28). The answer needs only enough of it to be recognised;
the engine's commands, the model catalogue's refusal and the console share this rule (decision 487).
Imports nothing of klaw.
"""

from __future__ import annotations

PREVIEW_CHARS = 60


def preview(text: str, chars: int = PREVIEW_CHARS) -> str:
    """`text` on one line (runs of whitespace made one space), cut to `chars` with an ellipsis."""
    shown = " ".join(text.split())
    return shown if len(shown) <= chars else shown[: chars - 1] + "…"
