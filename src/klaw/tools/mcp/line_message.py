"""One line of a command server's stdout as a JSON-RPC message, with how many content items a result keeps
bounded, and a message too deep to read told apart from a stray line.

A result of 200,000 one-character content items (5.8 MB, well under the 16 MB line cap) cost the event loop
19 s (adversary27 M2): pydantic's parse of the line (2-3 s) and then the SDK's two validations of the result
(10.5 s), every other chat waiting. A line with more than `MAX_CONTENT_ITEMS` `"type"` keys — counted in the
raw text, where a quote inside a string is always escaped, so only keys and values outside strings match —
is parsed by Python's own parser (four times faster), its result's content cut to the first
`MAX_CONTENT_ITEMS` with a sentence saying so for the model, and only then validated. Other lines are
parsed as the SDK does.

A message nested deeper than pydantic's parser reads (200 levels; adversary27 L2: 100,000) was dropped as a
stray line, and its call then waited out its whole timeout to be told the server "did not answer": it is
`Unreadable` now, and the reader ends the connection at once (stdio_lines.py) so the call says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

MAX_CONTENT_ITEMS = 1000
"""A tool's result with more content items than this keeps this many (decision 478)."""

TOO_DEEP = "nested deeper than the 200 levels klaw reads"


@dataclass(frozen=True)
class Unreadable:
    """A line that is a message klaw cannot read, and why (words without its content)."""

    why: str


def line_message(text: str) -> SessionMessage | Unreadable | None:
    """The line as a JSON-RPC message; `Unreadable` when it is one klaw cannot read; None when it is no
    JSON-RPC message at all (a server's log line on its stdout)."""
    if text.count('"type"') <= MAX_CONTENT_ITEMS:
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(text, by_name=False))
        except ValidationError as exc:  # it quotes the line: never logged
            if any("recursion limit" in error["msg"] for error in exc.errors(include_input=False)):
                return Unreadable(TOO_DEEP)
            return None
    try:
        data = json.loads(text)
    except RecursionError:
        return Unreadable(TOO_DEEP)
    except ValueError:
        return None
    _cut_content(data)
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(data, by_name=False))
    except ValueError:
        return None


def _cut_content(data: Any) -> None:
    """A result's content past `MAX_CONTENT_ITEMS` left out, with a last text item saying so."""
    if not isinstance(data, dict) or not isinstance(result := data.get("result"), dict):
        return
    content = result.get("content")
    if isinstance(content, list) and len(content) > MAX_CONTENT_ITEMS:
        said = (
            f"[klaw kept the first {MAX_CONTENT_ITEMS:,} of the {len(content):,} content items this tool's"
            " result had; the rest were left out]"
        )
        result["content"] = [*content[:MAX_CONTENT_ITEMS], {"type": "text", "text": said}]
