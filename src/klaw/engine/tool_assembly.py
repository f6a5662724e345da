"""Assembling the tools a turn may call: the built-in groups engine.yaml enables, the caller's own tools,
installed plugins', skills and the docs index, and the MCP servers' (started on the engine's exit stack).

Split from assembly.py so that the engine's start reads as its steps; each function returns its part whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack

from klaw.config import EngineConfig
from klaw.engine.clock import Clock
from klaw.home import KlawHome
from klaw.home_init import WORKSPACE_FILES as PROMPT_FILES
from klaw.memory.embedder.protocol import Embedder
from klaw.tools.builtin.defaults import register_builtin_tools
from klaw.tools.builtin.groups import tools_in
from klaw.tools.builtin.memory_tools import MemoryServices, register_memory_tools
from klaw.tools.docs.bundle import DocsBundle
from klaw.tools.docs.index import DocsIndex
from klaw.tools.docs.tools import register_docs_tools
from klaw.tools.host.tool import register_host_exec
from klaw.tools.mcp.servers import McpServers
from klaw.tools.plugins import register_plugins
from klaw.tools.registry import ToolRegistry
from klaw.tools.sandbox.choice import choose_backend
from klaw.tools.sandbox.tool import register_code_execute
from klaw.tools.schema import ToolFunction
from klaw.tools.selection import ToolSelection
from klaw.tools.skills.catalogue import SkillCatalogue
from klaw.tools.skills.tools import register_skill_tools
from klaw.tools.web.tools import register_web_tools, search_unavailable


def skill_catalogue(home: KlawHome, config: EngineConfig) -> SkillCatalogue | None:
    """The workspace's skills, when the `skills` group is enabled (else no layer and no tools)."""
    if "skills" not in config.tool_groups:
        return None
    return SkillCatalogue(home.skills_dir, max_bytes=config.tools.skills.max_file_bytes)


def docs_index(home: KlawHome, config: EngineConfig, embedder: Embedder) -> DocsIndex | None:
    """The search index of the docs shipped with klaw, when the `docs` group is enabled."""
    if "docs" not in config.tool_groups:
        return None
    return DocsIndex(home.docs_index_file, DocsBundle.shipped(), embedder, config.search)


def tool_registry(
    home: KlawHome,
    config: EngineConfig,
    services: MemoryServices,
    extra: Sequence[ToolFunction],
    skills: SkillCatalogue | None,
    docs: DocsIndex | None,
) -> ToolSelection:
    """The built-in groups engine.yaml offers (to any model), then the caller's own tools (always
    offered); which a model gets is the selection's. The scheduling tools join when the scheduler
    exists (engine/scheduler_assembly.py), MCP servers' as each lists them. code_execute and
    host_exec are offered when available (a sandbox works here; hostExec.allow lists commands)."""
    registry = ToolRegistry(offered=tools_in(config.tool_groups))
    register_builtin_tools(registry, allow_prompt_edits=config.tools.allow_prompt_edits)
    register_memory_tools(registry, services)
    if skills is not None:
        register_skill_tools(registry, skills, max_bytes=config.tools.skills.max_file_bytes)
    register_web_tools(registry, config.web)
    if (why := search_unavailable(config.web)) is not None:
        registry.note_unavailable("web_search", why)
    if registry.wants("code_execute"):
        # The prompt files go into every turn: code may not change them unless file_write may.
        protected = () if config.tools.allow_prompt_edits else PROMPT_FILES
        register_code_execute(registry, choose_backend(config.sandbox, home), config.sandbox, read_only=protected)
    register_host_exec(registry, config.host_exec)
    if docs is not None:
        register_docs_tools(registry, docs.bundle, docs)
    for tool in extra:
        registry.register(tool, offer=True)
    plugins = register_plugins(registry, config.tool_groups)  # installed packages' tools, enabled by name
    return ToolSelection(registry, config.tools_for, plugins, config.mcp.servers)


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
        workspace=home.workspace,
        log_dir=home.mcp_logs,
    )
    stack.push_async_callback(servers.aclose)
    await servers.start()
    return servers


def unavailable_tools(registry: ToolRegistry) -> list[str]:
    """/status lines: each tool the configuration asks for but cannot offer, and why."""
    return [f"Not offered: {name}: {why}" for name, why in registry.unavailable.items()]
