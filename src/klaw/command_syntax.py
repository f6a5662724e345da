"""What a slash command looks like in typed text: `/name args`.

One parser for every place that must tell a command from a message: the engine (text submitted in
process, e.g. the console), the gateway (slash text becomes a `command` frame) and the Telegram
channel (`/new@thisbot`). It imports nothing of klaw, so the gateway, which may not import the
engine, and the engine share it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParsedCommand:
    name: str  # lower-case, without the slash
    args: str  # the rest of the line, trimmed ("" when none)


def parse_command(text: str) -> ParsedCommand | None:
    """`/model  gpt-4o` → ParsedCommand("model", "gpt-4o"); None for text that is not a command:
    no leading slash, a lone "/", "/ x", or "//" (a way to send text starting with a slash)."""
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2 or stripped[1].isspace() or stripped.startswith("//"):
        return None
    name, _, args = stripped[1:].partition(" ")
    return ParsedCommand(name.lower(), args.strip())
