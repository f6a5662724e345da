"""Splitting a reply into messages Telegram accepts: at most 4096 characters each.

Telegram counts UTF-16 code units (an emoji outside the basic plane counts twice), so lengths are
measured that way. A long reply is cut at the last paragraph break in the second half of the
allowed length, else the last line break there, else the last space, else hard at the limit; the
separator at a cut is dropped, nothing else is, so code keeps its indentation.

A reply is sent as at most MAX_REPLY_PARTS messages, then one closing message saying how much was
not sent and where the whole reply is (decision 479): a model stuck in a loop answered 1.89 million
characters, which became 462 messages in a minute, far past Telegram's pace (about one message a
second in a chat, twenty a minute in a group) and past anything a person reads on a phone.
"""

from __future__ import annotations

TELEGRAM_MESSAGE_LIMIT = 4096
MAX_REPLY_PARTS = 8
"""Messages one reply becomes on Telegram at most (32 KB of text), before the closing one."""
REPLY_CUT = (
    "(Reply cut here: {rest:,} more characters were not sent, since Telegram takes {parts} messages of one"
    " reply. The whole reply is kept in klaw's conversation log; ask for a shorter answer or for the part"
    " you need.)"
)


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def reply_parts(text: str, max_parts: int = MAX_REPLY_PARTS) -> list[str]:
    """The messages a reply is sent as: its first `max_parts` parts, then, if more is left, one
    closing part naming how many characters were not sent. Only what is sent is split."""
    parts, rest = _split(text, TELEGRAM_MESSAGE_LIMIT, max_parts)
    left = len(rest.strip())
    if left:
        parts.append(REPLY_CUT.format(rest=left, parts=max_parts))
    return parts


def split_message(text: str, limit: int = TELEGRAM_MESSAGE_LIMIT) -> list[str]:
    """`text` as parts of at most `limit` UTF-16 units, in order; [] for blank text."""
    return _split(text, limit, None)[0]


def _split(text: str, limit: int, max_parts: int | None) -> tuple[list[str], str]:
    """Up to `max_parts` parts of `text` (all when None), and what is left after them."""
    if limit < 2:
        raise ValueError("limit must be at least 2")
    parts: list[str] = []
    rest = text
    while utf16_length(rest) > limit:
        if max_parts is not None and len(parts) >= max_parts:
            return parts, rest
        window = _prefix_within(rest, limit)
        cut, skip = _cut(window)
        part = rest[:cut]
        if part.strip():
            parts.append(part)
        rest = rest[cut + skip :]
    if rest.strip():
        if max_parts is not None and len(parts) >= max_parts:
            return parts, rest
        parts.append(rest)
    return parts, ""


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
