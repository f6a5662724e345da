"""Assembling the tools a turn may call: the groups engine.yaml enables, klaw's and installed packages'
through one seam (klaw/tools/groups.py), the caller's own tools, and the MCP servers' (started on the
engine's exit stack).

Split from assembly.py so that the engine's start reads as its steps; each function returns its part whole.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from klaw.config import EngineConfig
from klaw.engine.clock import Clock, monotonic
from klaw.home import KlawHome
from klaw.memory.embedder.protocol import Embedder
from klaw.tools.builtin.groups import BUILTIN_GROUPS
from klaw.tools.docs.bundle import DocsBundle
from klaw.tools.docs.index import DocsIndex
from klaw.tools.groups import ServiceKey, ToolGroups, ToolSetup
from klaw.tools.mcp.servers import McpServers
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolFunction
from klaw.tools.selection import ToolSelection
from klaw.tools.skills.catalogue import SkillCatalogue


def skill_catalogue(home: KlawHome, config: EngineConfig, *, logged: bool = True) -> SkillCatalogue | None:
    """The workspace's skills, when the `skills` group is enabled (else no layer and no tools). `logged`:
    its problems are logged once for the home (KLAW_HOME/logs/skills_said, decision 489); a listing that
    holds its log lines back (`klaw tools`) passes False, so what it found is not taken as said."""
    if "skills" not in config.tool_groups:
        return None
    said = home.root / "logs" / "skills_said" if logged else None
    return SkillCatalogue(home.skills_dir, max_bytes=config.tools.skills.max_file_bytes, said_file=said)


def docs_index(home: KlawHome, config: EngineConfig, embedder: Embedder | None) -> DocsIndex | None:
    """The search index of the docs shipped with klaw, when the `docs` group is enabled (without an
    embedder, full text alone: `klaw tools` lists its tools and never builds it)."""
    if "docs" not in config.tool_groups:
        return None
    return DocsIndex(home.docs_index_file, DocsBundle.shipped(), embedder, config.search)


def tool_registry(
    home: KlawHome,
    config: EngineConfig,
    services: Mapping[ServiceKey[Any], object],
    extra: Sequence[ToolFunction],
) -> ToolSelection:
    """The groups engine.yaml enables (to any model), klaw's and installed packages' alike, provided as far
    as `services` allow; then the caller's own tools (offered to every model). Which tools a model gets is
    the selection's. The groups needing later services are provided by `provide_late_groups`; MCP servers'
    tools join as each lists them."""
    registry = ToolRegistry()
    groups = ToolGroups(config.tool_groups, BUILTIN_GROUPS, home.plugins_seen_file)
    groups.provide(ToolSetup(registry, config, home, services))
    for tool in extra:
        registry.register(tool)
    return ToolSelection(registry, config.tools_for, groups, config.mcp.servers)


def provide_late_groups(
    home: KlawHome, config: EngineConfig, selection: ToolSelection, services: Mapping[ServiceKey[Any], object]
) -> None:
    """The groups whose services exist only once the turn runner does (the scheduler's, message_send)."""
    selection.groups.provide(ToolSetup(selection.registry, config, home, services))


async def start_mcp_servers(
    home: KlawHome, config: EngineConfig, clock: Clock, stack: AsyncExitStack, registry: ToolRegistry
) -> McpServers:
    """The MCP servers tools.enabled names, started (waited for at most mcp.startWaitSeconds); their tools
    join the registry as each lists them. A server that fails never fails the start: /status says why."""
    servers = McpServers(
        config.mcp,
        config.tool_groups,
        registry,
        now=clock.now,
        sleep=clock.sleep,
        monotonic=functools.partial(monotonic, clock),  # the backoff's timeline, whatever the wall clock does
        workspace=home.workspace,
        log_dir=home.mcp_logs,
    )
    stack.push_async_callback(servers.aclose)
    await servers.start()
    return servers


def unavailable_tools(selection: ToolSelection) -> list[str]:
    """/status lines: each tool the configuration asks for but cannot offer, why and (when klaw knows) the
    fix its `/tools` row gives; each group that failed to load (a plugin), whose fix `/tools` gives."""
    lines = [
        f"Not offered: {name}: {why}" + (f"; fix: {fix}" if (fix := selection.registry.unavailable_fix(name)) else "")
        for name, why in selection.registry.unavailable.items()
    ]
    failed = selection.groups.failures.items()
    return lines + [f"Not loaded: {group}: {failure.reason} (/tools says what to do)" for group, failure in failed]
