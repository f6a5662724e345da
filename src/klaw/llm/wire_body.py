"""A chat request's body as bytes, its tools' JSON encoded once per tool set (decision 336).

A turn offers the model the same tools at every call: in `klaw bench turn` 21 schemas, ~7.2 kB of a
~9 kB body, whose encoding was ~95 µs of the ~110 µs `json.dumps` took on the event loop per request.
`ToolsJson` keeps the last tool set's JSON and gives it again while the set is the same `ToolSpec`
objects (frozen: a changed tool is a new spec, e.g. an MCP server's new list); `request_body` encodes
everything else as httpx's `json=` does (same separators, `ensure_ascii=False`, `allow_nan=False`; the messages by
pydantic's encoder, which writes text the same: `_texts_json`), in the payload's own key order, so the bytes
sent are the bytes httpx would have sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic_core

from klaw.llm.messages import ToolSpec


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _texts_json(value: object) -> bytes:
    """`value` (the messages: dicts of text, null and lists) as `_dumps` writes it, by pydantic's encoder in
    Rust: half the CPU of `json.dumps` for a turn's ~5 kB of messages (decision 504). The two write text the
    same (the same escapes, UTF-8 as it is); they differ in a float's exponent (1e-07, 1e-7) and in a NaN, which
    no message holds but which go through `json` anyway, as does anything pydantic's encoder refuses (a lone
    surrogate: the same `UnicodeEncodeError` as before)."""
    if isinstance(value, list):
        try:
            return pydantic_core.to_json(value)
        except pydantic_core.PydanticSerializationError:
            pass
    return _dumps(value).encode("utf-8")


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
    (`ToolsJson.of` of the tools offered), its `messages` by `_texts_json`."""
    parts = []
    for key, value in payload.items():
        if key == "tools" and tools_json is not None:
            encoded = tools_json.encode("utf-8")
        elif key == "messages":
            encoded = _texts_json(value)
        else:
            encoded = _dumps(value).encode("utf-8")
        parts.append(_dumps(key).encode("utf-8") + b":" + encoded)
    return b"{" + b",".join(parts) + b"}"
