"""The tool groups `tools.enabled` chooses from, and the tools in each.

A group is what a person turns off as one decision ("this model does not schedule"); the names are
the ones each `register_*` function gives its tools. A tool outside every group would never be
offered, so the engine tests check that the groups cover exactly the default engine's tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from klaw.config import ToolGroup

TOOL_GROUPS: Mapping[ToolGroup, tuple[str, ...]] = {
    "clock": ("current_time",),
    "files": ("file_read", "file_write", "file_list"),
    "memory": ("fetch_conversation_details", "memory_save", "memory_search", "memory_core_get", "memory_core_update"),
    "scheduler": ("schedule_add", "schedule_list", "schedule_remove"),
    "subagents": ("subagent_spawn",),
    "messaging": ("message_send",),
    "skills": ("skill_list", "skill_read"),
    "web": ("web_fetch",),
    "websearch": ("web_search",),
    "code": ("code_execute",),
    "host": ("host_exec",),
    "docs": ("docs_list", "docs_read", "docs_search"),
}


def tools_in(groups: Iterable[str]) -> frozenset[str]:
    """The names of the built-in tools in `groups` (a plugin's name adds none here: klaw/tools/plugins.py)."""
    return frozenset(name for group in groups for name in TOOL_GROUPS.get(group, ()))  # type: ignore[call-overload]
