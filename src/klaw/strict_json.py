"""Reading one JSON document that came from outside (a log line, a socket frame) without letting it crash us.

`json.loads` accepts things klaw cannot live with: nesting deep enough to raise `RecursionError`
(which is not a `ValueError`, so callers catching bad JSON miss it), `NaN`/`Infinity`, and `\\ud800`
escapes that decode to lone surrogates, which are not text: every later UTF-8 encode of them fails
(SQLite, the log, the socket), far from the line that carried them. `loads` refuses all of these with
`StrictJsonError`, whose message never quotes the input (it may be private text), so a reader can
report file:line and the reason and skip the line.

What klaw takes in rather than refuses — a model's answer and its tool calls' arguments, a tool's
result — is repaired instead (`as_text`, `repaired`): a lone surrogate there is most often an emoji cut
in half by a server, not an attack, and refusing it would fail a whole turn over one character.

Imports nothing else of klaw, so the log (memory), the socket protocol (engine) and the gateway share it.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

from klaw.errors import KlawError

MAX_DEPTH = 64
"""Deeper than this is refused: no record or frame klaw writes nests more than a few levels."""


class StrictJsonError(KlawError, ValueError):
    """Not a JSON document klaw accepts; `str()` names the problem, never the content."""


def decode_problem(exc: json.JSONDecodeError) -> str:
    """What is wrong, where: json's message without its trailing "at" (its `str()` appends the position
    there, and never the text, so neither does this)."""
    return f"invalid JSON at column {exc.colno}: {exc.msg.removesuffix(' at')}"


def loads(text: str | bytes) -> Any:
    """The parsed value, or `StrictJsonError` saying what is wrong (never what the text said)."""
    try:
        value = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise StrictJsonError(decode_problem(exc)) from None
    except RecursionError:
        raise StrictJsonError(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    except UnicodeDecodeError:
        raise StrictJsonError("not valid UTF-8") from None
    except ValueError:  # NaN/Infinity; an integer too long to convert
        raise StrictJsonError("invalid JSON: a number that is not representable") from None
    problem = find_problem(value)
    if problem is not None:
        raise StrictJsonError(problem)
    return value


def find_problem(value: Any) -> str | None:
    """Why `value` (parsed JSON) is refused — too deep, or a string that is not valid Unicode — or None.

    Iterative, so a deep value cannot exhaust the stack while being checked."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not is_text(item):
                return "a string holds a lone surrogate (a \\ud800-\\udfff escape), which is not text"
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return f"JSON nested more than {MAX_DEPTH} levels deep"
            if isinstance(item, dict):
                stack.extend((key, depth + 1) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def is_text(value: str) -> bool:
    """Whether `value` can be written as UTF-8 (it holds no lone surrogate)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(value: str) -> str:
    """`value` with every lone surrogate replaced by U+FFFD (�), the character Unicode has for one that
    could not be read; two halves of one character that arrived apart are joined back into it.

    For text klaw takes in rather than refuses (a model's answer, a tool's result): stored, logged and
    sent as it is, a lone surrogate fails the first UTF-8 encode it meets (SQLite, the log, a socket)."""
    if is_text(value):
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class SplitPairs:
    """Text streamed in pieces (a model's answer, each tool call's arguments: one `key` each) made text
    piece by piece, a character whose two UTF-16 halves a server sent in two pieces joined back: each
    piece made `as_text` alone turned one emoji into two U+FFFD. A piece ending in a first half keeps it
    back until that stream's next piece; `rest` gives what is still kept back when the answer ends."""

    def __init__(self) -> None:
        self._held: dict[object, str] = {}

    def piece(self, key: object, text: str) -> str:
        text = self._held.pop(key, "") + text
        if text and "\ud800" <= text[-1] <= "\udbff":  # a first half: its second may open the next piece
            self._held[key], text = text[-1], text[:-1]
        return as_text(text)

    def rest(self) -> dict[object, str]:
        """Each stream's half whose other half never came, as U+FFFD; none kept back after."""
        rest = {key: "\ufffd" for key in self._held}
        self._held.clear()
        return rest


def repaired(value: Any) -> Any:
    """Parsed JSON with every string, keys included, made `as_text`; the same objects when none needed it.
    Recursive: the caller bounds the depth (a `RecursionError` means nested too deep)."""
    if isinstance(value, str):
        return as_text(value)
    if isinstance(value, dict):
        return {as_text(key) if isinstance(key, str) else key: repaired(item) for key, item in value.items()}
    if isinstance(value, list):
        return [repaired(item) for item in value]
    return value


def reject_constant(name: str) -> NoReturn:
    """For `json.loads(parse_constant=...)`: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


def int_digits_limit() -> int:
    """The most digits Python turns into an int (`sys.set_int_max_str_digits`; 4,300 by default)."""
    return sys.get_int_max_str_digits() or sys.int_info.default_max_str_digits


class _LongNumber:
    def __init__(self, digits: int) -> None:
        self.digits = digits


def too_long_number(text: str | bytes) -> tuple[str, int] | None:
    """Where JSON `text` holds an integer with more digits than Python reads (`json.loads` raises a bare
    ValueError for it, naming no place): the first one's path ("text", "items.0"; "" for the document
    itself) and its number of digits. None when it holds none, or cannot be read for another reason."""
    limit = int_digits_limit()

    def parse_int(digits: str) -> object:
        count = len(digits.lstrip("-"))
        return _LongNumber(count) if count > limit else 0  # the value itself is never needed

    try:
        value = json.loads(text, parse_int=parse_int, parse_constant=reject_constant)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _LongNumber):
            return path, item.digits
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        stack.extend((child, f"{path}.{key}" if path else str(key)) for key, child in reversed(list(children)))
    return None
