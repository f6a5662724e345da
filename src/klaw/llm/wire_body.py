"""A chat request's body as bytes, its tools' JSON encoded once per tool set (decision 336).

A turn offers the model the same tools at every call: in `klaw bench turn` 21 schemas, ~7.2 kB of a
~9 kB body, whose encoding was ~95 µs of the ~110 µs `json.dumps` took on the event loop per request.
`ToolsJson` keeps the last tool set's JSON and gives it again while the set is the same `ToolSpec`
objects (frozen: a changed tool is a new spec, e.g. an MCP server's new list); `request_body` encodes
everything else as httpx's `json=` does (same separators, `ensure_ascii=False`, `allow_nan=False`), in
the payload's own key order, so the bytes sent are the bytes httpx would have sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from klaw.llm.messages import ToolSpec


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class ToolsJson:
    """The JSON of the last tool set asked for, kept while the same specs are offered."""

    def __init__(self) -> None:
        self._kept: tuple[tuple[ToolSpec, ...], str] | None = None

    def of(self, tools: Sequence[ToolSpec]) -> str:
        kept = self._kept
        if kept is not None and len(kept[0]) == len(tools) and all(a is b for a, b in zip(kept[0], tools, strict=True)):
            return kept[1]
        text = _dumps([tool.to_wire() for tool in tools])
        self._kept = (tuple(tools), text)
        return text


def request_body(payload: Mapping[str, Any], tools_json: str | None = None) -> bytes:
    """`payload` as JSON bytes, its `tools` (whatever holds the place) written as `tools_json` when given
    (`ToolsJson.of` of the tools offered)."""
    if tools_json is None or "tools" not in payload:
        return _dumps(payload).encode("utf-8")
    parts = [f"{_dumps(key)}:{tools_json if key == 'tools' else _dumps(value)}" for key, value in payload.items()]
    return ("{" + ",".join(parts) + "}").encode("utf-8")
