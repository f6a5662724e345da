"""Text a model, a tool or a stored message holds, made safe to print on a terminal.

Such text can carry terminal control sequences: ESC [2J clears the screen, ESC ]0;… sets the window
title, a carriage return goes back to the start of the line and the rest overwrites what was printed.
Printed raw, a fetched page or a model could hide the real arguments of a tool call behind
"hello world" in the very question that asks a person to approve it (rich strips only a few controls,
not ESC). So every control character but newline and tab is shown as a visible stand-in: the Unicode
control picture for C0 (ESC is ␛, CR ␍), ␡ for DEL, and an escape such as `\\x9b` for C1 and for
the bidirectional overrides that reorder what a line appears to say. Nothing is hidden, and what was
there stays readable.
"""

from __future__ import annotations

_C0 = {code: 0x2400 + code for code in range(0x20) if code not in (0x09, 0x0A)}
_OTHER = {0x7F: "␡"} | {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}
_TABLE: dict[int, int | str] = {**_C0, **_OTHER}


def visible(text: str) -> str:
    """`text` with every terminal control character shown, not obeyed (a CR LF line end is a newline)."""
    return text.replace("\r\n", "\n").translate(_TABLE)
