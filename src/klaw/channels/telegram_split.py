"""Splitting a reply into messages Telegram accepts: at most 4096 characters each.

Telegram counts UTF-16 code units (an emoji outside the basic plane counts twice), so lengths are
measured that way. A long reply is cut at the last paragraph break in the second half of the
allowed length, else the last line break there, else the last space, else hard at the limit; the
separator at a cut is dropped, nothing else is, so code keeps its indentation.
"""

from __future__ import annotations

TELEGRAM_MESSAGE_LIMIT = 4096


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = TELEGRAM_MESSAGE_LIMIT) -> list[str]:
    """`text` as parts of at most `limit` UTF-16 units, in order; [] for blank text."""
    if limit < 2:
        raise ValueError("limit must be at least 2")
    parts: list[str] = []
    rest = text
    while utf16_length(rest) > limit:
        window = _prefix_within(rest, limit)
        cut, skip = _cut(window)
        part = rest[:cut]
        if part.strip():
            parts.append(part)
        rest = rest[cut + skip :]
    if rest.strip():
        parts.append(rest)
    return parts


def _prefix_within(text: str, limit: int) -> str:
    """The longest prefix of `text` whose UTF-16 length is at most `limit`."""
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return text[:index]
    return text


def _cut(window: str) -> tuple[int, int]:
    """Where to end this part within `window`, and how many separator characters to drop there."""
    half = len(window) // 2
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at > 0 and (at >= half or separator == " "):
            return at, len(separator)
    return len(window), 0
