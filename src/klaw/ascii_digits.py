"""Numbers as protocols, files and people write them: ASCII digits, and not too many of them.

`str.isdigit()` is true of '²' and of other scripts' digits, which `int()` then refuses with ValueError (a
traceback where a refusal was meant: adversary21's `klaw_session=²…` cookie, HTTP 500 before sign-in), and
`int()` refuses more than 4,300 digits too. Every number klaw reads from outside (a header, a cookie, a
query, a stored schedule, a chat id) is checked by `digits` before `int()`.
"""

from __future__ import annotations


def digits(text: str, most: int = 18) -> bool:
    """Whether `text` is 1 to `most` ASCII digits, so that `int(text)` works and is below 10**most."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()
