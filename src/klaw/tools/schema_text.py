"""The text of a tool's schema, as the model reads it every turn: descriptions taken from a Google-style
docstring, and pydantic's JSON schema trimmed of what costs tokens and says nothing.

Kept apart from klaw/tools/schema.py, which turns a function into a tool and checks the model's arguments:
this is only text in and text out, with no tool in sight (`describe_invalid` reads pydantic's errors
into the words every tool answers, klaw mcp serve's too, which may import this text and nothing else
of klaw.tools).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_MAX_ERRORS_SHOWN = 10
_MAX_LOC_PART = 60


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Google-style docstring → (text before the first section, {parameter: description} from Args:).

    Deliberately small: an entry is `name: text` or `name (type): text` at the section's first
    indentation; deeper-indented lines continue it; an unindented line ends the section.
    """
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            section, entry_indent, current = header.group(1), None, None
        elif section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            if indent == 0:
                section = "other"
                continue
            if entry_indent is None:
                entry_indent = indent
            entry = _ARG_LINE.match(line.strip()) if indent == entry_indent else None
            if entry:
                current = entry.group(1)
                args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    # Wrapped lines are re-joined: the model reads one paragraph, not the source's line breaks.
    paragraphs = "\n".join(summary).strip().split("\n\n")
    text = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    return text, {name: described for name, described in args.items() if described}


def trimmed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop what pydantic's schema carries for nothing; it is sent, and paid for in tokens, every turn.

    Gone: `title`s (they repeat the property names), `additionalProperties: true` (the default), and on
    a parameter that defaults to None its `null` branch and `default: null`: leaving the parameter out
    says the same, and an explicit null still validates. `additionalProperties: false` stays: grammar-
    constrained servers (llama.cpp) turn it into "no other keys" while the model writes the call.
    """

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("title"), str):
                del node["title"]
            if node.get("additionalProperties") is True:
                del node["additionalProperties"]
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    for name, sub in value.items():
                        value[name] = _without_null_default(sub)
                        walk(value[name])
                elif key == "$defs" and isinstance(value, dict):
                    for sub in value.values():
                        walk(sub)
                elif key not in ("default", "enum", "const", "examples"):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return schema


def _without_null_default(prop: Any) -> Any:
    """`{"anyOf": [X, {"type": "null"}], "default": null, ...}` → `{...X, ...}`: optional says it already."""
    if not isinstance(prop, dict) or "default" not in prop or prop["default"] is not None:
        return prop
    rest = {key: value for key, value in prop.items() if key != "default"}
    options = rest.get("anyOf")
    if not isinstance(options, list):
        return rest
    kept = [option for option in options if option != {"type": "null"}]
    if not kept:  # `x: None = None`: nothing else to offer
        return prop
    if len(kept) == 1 and isinstance(kept[0], dict):
        del rest["anyOf"]
        return {**kept[0], **rest}
    rest["anyOf"] = kept
    return rest


def describe_invalid(exc: ValidationError, schema: Mapping[str, Any] | None = None) -> str:
    """Pydantic's errors as '- field: rule' lines, without the offending values (they can be huge).

    With the tool's `schema`, an argument it does not take or one it needs and did not get adds the line
    naming the arguments it takes: "key: Extra inputs are not permitted" alone left a person (and a model)
    guessing that memory_core_update takes `set` and `remove` (newcomer18, decision 464)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    lines = [
        f"- {'.'.join(_clip_part(str(part), _MAX_LOC_PART) for part in e['loc']) or '(arguments)'}: {_rule(e)}"
        for e in errors[:_MAX_ERRORS_SHOWN]
    ]
    if len(errors) > _MAX_ERRORS_SHOWN:
        lines.append(f"- … and {len(errors) - _MAX_ERRORS_SHOWN} more")
    misnamed = any(e["type"] in ("extra_forbidden", "missing") and len(e["loc"]) == 1 for e in errors)
    if schema is not None and misnamed and (taken := takes(schema)):
        lines.append(f"- the arguments this tool takes: {taken}")
    return "invalid arguments:\n" + "\n".join(lines)


def argument_lines(schema: Mapping[str, Any]) -> list[str]:
    """A tool's arguments one per line, for a person (`klaw tools NAME`): 'path (string, required): what it
    is', a list's item type, a choice's values and a default said too; nothing when it takes none."""
    lines = []
    for name, prop, notes in _arguments(schema):
        if "default" in prop:
            notes.append(f"default {json.dumps(prop['default'])}")
        said = prop.get("description")
        head = f"{name} ({', '.join(notes)})" if notes else name
        lines.append(f"{head}: {said}" if isinstance(said, str) and said else head)
    return lines


def takes(schema: Mapping[str, Any]) -> str:
    """A tool's arguments by name on one line, each with its type and whether it is required: 'path
    (string, required), mode (string)'; empty when the schema names none."""
    return ", ".join(f"{name} ({', '.join(notes)})" if notes else name for name, _, notes in _arguments(schema))


def _arguments(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], list[str]]]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    found = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        kind = _kind(prop)
        notes = [kind] if kind else []
        if name in needed:
            notes.append("required")
        found.append((str(name), prop, notes))
    return found


def _kind(prop: Mapping[str, Any]) -> str:
    """A property's JSON type as words: 'string', 'list of string', 'one of "a", "b"', 'integer or string'."""
    if isinstance(prop.get("enum"), list):
        return "one of " + ", ".join(json.dumps(value) for value in prop["enum"])
    kind = prop.get("type")
    items = prop.get("items")
    if kind == "array" and isinstance(items, Mapping) and (inner := _kind(items)):
        return f"list of {inner}"
    if isinstance(kind, str):
        return kind
    options = prop.get("anyOf")
    if isinstance(options, list):
        return " or ".join(found for option in options if isinstance(option, Mapping) and (found := _kind(option)))
    return ""


def _rule(error: Any) -> str:
    """The rule broken, in the tool's words: a validator of klaw's own raising ValueError reads in pydantic
    as "Value error, <our sentence>"; the sentence alone is what the model needs (as config_loader does)."""
    message = str(error["msg"])
    if error["type"] == "value_error" and message.startswith(_VALUE_ERROR):
        return message[len(_VALUE_ERROR) :]
    return message


_VALUE_ERROR = "Value error, "


def _clip_part(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
