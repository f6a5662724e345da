"""Text a model, a tool or a stored message holds, made safe to print on a terminal.

Such text can carry terminal control sequences: ESC [2J clears the screen, ESC ]0;… sets the window
title, a carriage return goes back to the start of the line and the rest overwrites what was printed.
Printed raw, a fetched page or a model could hide the real arguments of a tool call behind
"hello world" in the very question that asks a person to approve it (rich strips only a few controls,
not ESC). So every control character but newline and tab is shown as a visible stand-in: the Unicode
control picture for C0 (ESC is ␛, CR ␍), ␡ for DEL, and an escape such as `\\x9b` for C1 and for
the bidirectional overrides that reorder what a line appears to say. Nothing is hidden, and what was
there stays readable. `one_line` shows line breaks too, for what must stay on its line: a log line
(klaw's log formatter, log_format.py, passes every message through it), a row of `klaw tools`.

A reply is shown as Markdown, where a single line break is a space: a model's poem, address or
step-by-step lines ran together into one paragraph. `kept_line_breaks` makes each such break a hard one,
as chat apps show a message (GitHub's comments do the same), leaving code blocks and blank lines alone,
and escapes a tabulate rule line (`-  -`), which Markdown would show as an empty list or a horizontal
rule; the web page passes over the same lines in its parser (channels/web/markdown.py). Telegram gets
the text as written.
"""

from __future__ import annotations

import re

_C0 = {code: 0x2400 + code for code in range(0x20) if code not in (0x09, 0x0A)}
_OTHER = {0x7F: "␡"} | {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}
_TABLE: dict[int, int | str] = {**_C0, **_OTHER}
_LINE_TABLE: dict[int, int | str] = {**_TABLE, 0x0A: 0x240A, 0x2028: "\\u2028", 0x2029: "\\u2029"}


def visible(text: str) -> str:
    """`text` with every terminal control character shown, not obeyed (a CR LF line end is a newline)."""
    return text.replace("\r\n", "\n").translate(_TABLE)


def one_line(text: str) -> str:
    """`text` as one line with nothing obeyed: `visible`, and a line break shown too (CR LF as ␍␊), for
    a log line or a listing's row, where a break would start what reads as a line of its own
    (`WARNING klaw…: boom␍␊FAKE LINE`; decision 296)."""
    return text.translate(_LINE_TABLE)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

RULE_LINE = re.compile(r"[ \t]*-+(?:[ \t]+-+)+[ \t]*")
"""Two or more runs of dashes and nothing else, like tabulate's rule line `-  -` or `------  -----`: Markdown
reads `-  -` as an empty list inside an empty list and `------  -----` as a horizontal rule, so the line
vanished from a reply quoting a table. A rule written as Markdown (`---`, `***`, `* * *`) is one run."""


def kept_line_breaks(markdown: str) -> str:
    """`markdown` with every line break inside a paragraph made a hard break (two trailing spaces), so
    it is shown where the text has it, and a tabulate rule line (`RULE_LINE`) escaped, so it is shown as
    written; fenced code keeps its lines as they are (a fence keeps them anyway)."""
    lines = markdown.split("\n")
    fence: str | None = None
    for index, line in enumerate(lines):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        if RULE_LINE.fullmatch(line) and len(line) - len(line.lstrip(" ")) < 4:  # four spaces: a code block
            line = lines[index] = re.sub(r"(?<![-\\])-", r"\\-", line, count=0)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.strip() and following.strip() and not line.endswith("  "):
            lines[index] = line + "  "
    return "\n".join(lines)
