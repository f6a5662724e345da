"""Which of the registered tools a model is offered: its own `models.<id>.tools`, else `tools.enabled`.

Every offered tool's schema goes with every call, so a small local model is better off with fewer
groups (docs/decisions/121-tools-per-model.md). The registry holds the tools of every group some
model is offered; this picks, per model, the tools whose group that model has: a tool provided by a
group (klaw's or an installed package's, klaw/tools/groups.py) by that group's name, an MCP
server's (`<server>__<tool>`) by `mcp:<server>`. A tool of no group (a program's own, passed to
`Klaw(tools=…)`) goes to every model.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from klaw.config import MCP_GROUP_PREFIX
from klaw.llm.messages import ToolSpec
from klaw.tools.groups import ToolGroups
from klaw.tools.registry import ToolRegistry

MCP_SEPARATOR = "__"  # as klaw/tools/mcp/names.py joins a server's name and its tool's


class ToolSelection:
    """The tools offered to each model, from the registry's as they are now (MCP servers join late)."""

    def __init__(
        self,
        registry: ToolRegistry,
        groups_for: Callable[[str], Sequence[str]],
        groups: ToolGroups,
        mcp_servers: Collection[str] = (),
    ) -> None:
        """`groups_for`: a model's groups (EngineConfig.tools_for); `groups`: which group provided each
        tool (those provided later included); `mcp_servers`: the configured servers' names."""
        self.registry = registry
        self.groups = groups
        self._mcp_servers = frozenset(mcp_servers)
        self._groups_for = groups_for

    def model_groups(self, model_id: str) -> frozenset[str]:
        """The groups `model_id` is offered (its `models.<id>.tools`, else `tools.enabled`)."""
        return frozenset(self._groups_for(model_id))

    def specs(self, model_id: str) -> list[ToolSpec]:
        """The tools `model_id` is offered, in registration order."""
        groups = self.model_groups(model_id)
        return [spec for spec in self.registry.specs() if self.group_of(spec.name) in groups | {None}]

    def names(self, model_id: str) -> list[str]:
        """The names of the tools `model_id` may call."""
        return [spec.name for spec in self.specs(model_id)]

    def group_of(self, name: str) -> str | None:
        """The group a tool is enabled by; None for a tool of no group (offered to every model)."""
        group = self.groups.group_of(name)
        if group is None and MCP_SEPARATOR in name:
            server = name.split(MCP_SEPARATOR, 1)[0]
            return f"{MCP_GROUP_PREFIX}{server}" if server in self._mcp_servers else None
        return group
