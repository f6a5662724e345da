"""The engine's configuration: a pydantic model of `engine.yaml`, one module per group of sections.

Every field has a default so a missing file or section still starts the engine. Field names are
camelCase in YAML (as in the original design notes) and snake_case in Python. Validation errors are
turned into `ConfigError` naming the field, the value given and the rule broken, so start-up can
stop with a message a person can act on instead of a traceback. Loading and provenance (which value
came from where) live in `klaw.config_loader`.

A feature adds its section in the module of its group (`tools.py` for what the agent can do; a large
one a module of its own, as `web.py`) and names it here; everything outside imports from `klaw.config`.
"""

from __future__ import annotations

from klaw.config.base import ENV_VAR_NAME, ApiKeyEnv
from klaw.config.channels import ChannelsConfig, CommandConfig, TelegramChannelConfig, WebChannelConfig
from klaw.config.engine import EngineConfig
from klaw.config.mcp import MCP_GROUP_PREFIX, McpConfig, McpServerConfig
from klaw.config.memory import (
    AutoRagConfig,
    ContextConfig,
    DatabaseConfig,
    EmbedderConfig,
    FullTextTokenizer,
    MemoryConfig,
    ProcessingConfig,
    RagConfig,
    SearchConfig,
    SummarizerConfig,
)
from klaw.config.models import ModelConfig, RoutingConfig, RoutingTasks, context_budget
from klaw.config.sandbox import MAX_CALL_SECONDS, HostExecConfig, SandboxBackendName, SandboxConfig
from klaw.config.tools import (
    ALL_TOOL_GROUPS,
    TOOL_PLUGIN_GROUP,
    SchedulerConfig,
    SkillsConfig,
    ToolGroup,
    ToolsConfig,
    installed_tool_plugins,
)
from klaw.config.web import WebConfig, WebFetchConfig, WebSearchConfig

__all__ = [
    "ALL_TOOL_GROUPS",
    "ENV_VAR_NAME",
    "MAX_CALL_SECONDS",
    "MCP_GROUP_PREFIX",
    "TOOL_PLUGIN_GROUP",
    "ApiKeyEnv",
    "AutoRagConfig",
    "ChannelsConfig",
    "CommandConfig",
    "ContextConfig",
    "DatabaseConfig",
    "EmbedderConfig",
    "EngineConfig",
    "FullTextTokenizer",
    "HostExecConfig",
    "McpConfig",
    "McpServerConfig",
    "MemoryConfig",
    "ModelConfig",
    "ProcessingConfig",
    "RagConfig",
    "RoutingConfig",
    "RoutingTasks",
    "SandboxBackendName",
    "SandboxConfig",
    "SchedulerConfig",
    "SearchConfig",
    "SkillsConfig",
    "SummarizerConfig",
    "TelegramChannelConfig",
    "ToolGroup",
    "ToolsConfig",
    "WebChannelConfig",
    "WebConfig",
    "WebFetchConfig",
    "WebSearchConfig",
    "context_budget",
    "installed_tool_plugins",
]
