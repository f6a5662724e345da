"""A held call's arguments as the approval question shows them: every character that will run, visible,
the same on every channel (decision 295).

A person approves what they read, so what they read must be what runs. Text can hide itself: 1,600
spaces push the tail of `touch shown.txt` off the screen (and past a cut), a right-to-left override
(U+202E) reorders how a line reads, a zero-width space or a no-break space looks like nothing or like a
plain space yet is part of a word to a shell, and a control character is obeyed by a terminal. So:

- a run of more than `MAX_BLANKS` spaces and tabs in a line is counted, `⟦1600 spaces⟧`, and more than
  `MAX_BLANK_LINES` blank lines in a row likewise, `⟦300 blank lines⟧`;
- every invisible or reordering character (controls but tab and newline, format characters such as the
  bidi controls and zero-width ones, separators other than the plain space, private-use and unassigned
  code points, variation selectors and the fillers that draw nothing) is named, `⟦U+202E RIGHT-TO-LEFT
  OVERRIDE⟧`, a run of one such character counted (`×40`);
- `⟦` and `⟧` themselves are named too, so everything between them is klaw's and nothing the model
  wrote can pass for a marker.

What is left is shown whole or not at all: the caller refuses a call whose shown text is longer than
`MAX_SHOWN_CHARS` (it fits a Telegram message with the question around it), since a cut would again
leave part of what runs unread. The times a question says (its timeout, the time left) are worded here too.
"""

from __future__ import annotations

import math
import re
import unicodedata
from itertools import groupby

MAX_SHOWN_CHARS = 3000  # the shown arguments; the question around them stays under Telegram's 4096
MAX_BLANKS = 16  # spaces and tabs in a row kept as they are (indentation); a longer run is counted
MAX_BLANK_LINES = 2  # blank lines in a row kept as they are; more are counted

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_DRAW_NOTHING = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x27E6, 0x27E7})  # fillers, blank, ⟦ ⟧
_BLANK_RUN = re.compile(rf"[ \t]{{{MAX_BLANKS + 1},}}")


def shown(text: str) -> str:
    """`text` with nothing in it hidden: long blank runs counted, invisible characters named."""
    lines: list[str] = []
    blank: list[str] = []
    for line in text.split("\n"):
        if not line.strip(" \t"):
            blank.append(line)
            continue
        lines.extend(_blank_lines(blank))
        blank = []
        lines.append(_line(line))
    lines.extend(_blank_lines(blank))
    return "\n".join(lines)


def _blank_lines(blank: list[str]) -> list[str]:
    if len(blank) <= MAX_BLANK_LINES:
        return [_line(line) for line in blank]
    return [f"⟦{len(blank)} blank lines⟧"]


def _line(line: str) -> str:
    parts: list[str] = []
    start = 0
    for run in _BLANK_RUN.finditer(line):
        parts.append(_named(line[start : run.start()]))
        parts.append(_counted_blanks(run.group()))
        start = run.end()
    parts.append(_named(line[start:]))
    return "".join(parts)


def _counted_blanks(run: str) -> str:
    counts = [(run.count(" "), "space"), (run.count("\t"), "tab")]
    said = [f"{count} {what}{'s' if count != 1 else ''}" for count, what in counts if count]
    return f"⟦{' and '.join(said)}⟧"


def _named(text: str) -> str:
    parts: list[str] = []
    for char, run in groupby(text):
        count = len(list(run))
        if not _hidden(char):
            parts.append(char * count)
            continue
        name = unicodedata.name(char, "")
        label = f"U+{ord(char):04X}" + (f" {name}" if name else "")
        parts.append(f"⟦{label}{f' ×{count}' if count > 1 else ''}⟧")
    return "".join(parts)


def _hidden(char: str) -> bool:
    if char in " \t":
        return False
    code = ord(char)
    return (
        unicodedata.category(char) in _HIDDEN_CATEGORIES
        or code in _DRAW_NOTHING
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0xE0100 <= code <= 0xE01EF
        or code == 0x034F  # the rest of Unicode's default-ignorable marks: they draw nothing
        or 0x17B4 <= code <= 0x17B5
        or 0x180B <= code <= 0x180F
        or unicodedata.combining(char) == 1  # overlays (U+0336 strikes a letter through, disguising it)
    )


def time_left_words(seconds: float) -> str:
    """The time left to answer, rounded down to whole seconds (at least one): "4 minutes 59 seconds"."""
    minutes, rest = divmod(max(1, math.floor(seconds)), 60)
    words = [f"{minutes} minute{'s' if minutes != 1 else ''}"] if minutes else []
    return " ".join(words + ([f"{rest} second{'s' if rest != 1 else ''}"] if rest or not minutes else []))


def duration_words(seconds: float) -> str:
    """A whole timeout in words: "5 minutes", or "90 seconds" when it is not whole minutes."""
    minutes, whole = int(seconds // 60), seconds >= 60 and seconds % 60 == 0
    return f"{minutes} minute{'s' if minutes != 1 else ''}" if whole else f"{seconds:g} seconds"


def longest_backtick_run(text: str) -> int:
    """The longest run of backticks in `text`: the question's code fence is one longer."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest
