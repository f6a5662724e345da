"""Tool plugins: tools from installed packages, enabled by name in `tools.enabled` like the built-in groups.

A package offers tools by declaring an entry point in the `klaw.tools` group. Its name is what a
person writes in `tools.enabled`; its object is a sequence of plain typed `async def` functions with
docstrings, or a callable returning one, registered exactly like klaw's own tools:

    [project.entry-points."klaw.tools"]
    weather = "klaw_weather:TOOLS"

A name that is neither a built-in group nor an installed plugin is refused when engine.yaml is read
(klaw/config/tools.py). A plugin that fails to import, or hands over something that cannot be a tool, is logged
naming it and left out: the engine starts and every turn runs without it (decision 093).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points

from klaw.config import ALL_TOOL_GROUPS, MCP_GROUP_PREFIX, TOOL_PLUGIN_GROUP
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolFunction

log = logging.getLogger(__name__)


def register_plugins(registry: ToolRegistry, enabled: Iterable[str]) -> dict[str, list[str]]:
    """Register the tools of every enabled plugin (always offered); returns each plugin's tool names."""
    wanted = [name for name in enabled if name not in ALL_TOOL_GROUPS and not name.startswith(MCP_GROUP_PREFIX)]
    if not wanted:
        return {}
    found = {point.name: point for point in entry_points(group=TOOL_PLUGIN_GROUP)}
    registered: dict[str, list[str]] = {}
    for name in wanted:
        point = found.get(name)
        if point is None:
            log.warning("tools.enabled names %r, which no installed package offers (%s)", name, TOOL_PLUGIN_GROUP)
            continue
        try:
            registered[name] = _register(registry, point.load())
        except Exception as exc:
            log.error("tool plugin %r (%s) is left out: %s: %s", name, point.value, type(exc).__name__, exc)
    return registered


def _register(registry: ToolRegistry, loaded: object) -> list[str]:
    tools = loaded() if callable(loaded) else loaded
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise TypeError("a tool plugin's entry point must name a list of async functions (or a function returning one)")
    functions: list[ToolFunction] = list(tools)
    checked = ToolRegistry()  # all or nothing: a bad tool leaves the whole plugin out
    for tool in functions:
        checked.register(tool)
    for tool in functions:
        registry.register(tool, offer=True)
    return list(checked.names)
