"""The names an MCP server's tools reach the model under: `<server>__<tool>`.

OpenAI's rule for a function name is ^[a-zA-Z0-9_-]{1,64}$, while MCP allows dots, slashes and up to
128 characters. A tool's name keeps what the rule allows, every other character becomes `_`, and a
name too long is cut with a short hash of the original so two long names cannot collide. The prefix
keeps two servers' `search` tools apart and tells the model (and `tools.approval`) whose tool it is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

SEPARATOR = "__"
MAX_NAME = 64
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def prefixed(server: str, tool: str) -> str:
    """`server__tool`, within the 64-character rule (the server name is at most 24 characters)."""
    name = f"{server}{SEPARATOR}{_NOT_ALLOWED.sub('_', tool) or '_'}"
    if len(name) <= MAX_NAME and name == f"{server}{SEPARATOR}{tool}":
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:6]
    return f"{name[: MAX_NAME - len(digest) - 1]}-{digest}"


def model_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """The model's name for each of a server's tools: {prefixed name: the server's own name}."""
    return {prefixed(server, tool): tool for tool in tools}
