"""`EngineConfig`: the whole of `engine.yaml`, one section per part, and the check that routes name known models."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from klaw.ascii_digits import digits
from klaw.config.base import Section
from klaw.config.channels import ChannelsConfig, CommandConfig, _default_commands
from klaw.config.mcp import MCP_GROUP_PREFIX, McpConfig
from klaw.config.memory import (
    AutoRagConfig,
    ContextConfig,
    DatabaseConfig,
    EmbedderConfig,
    MemoryConfig,
    ProcessingConfig,
    RagConfig,
    SearchConfig,
    SummarizerConfig,
)
from klaw.config.models import ModelConfig, RoutingConfig, context_budget
from klaw.config.sandbox import HostExecConfig, SandboxConfig
from klaw.config.tools import SchedulerConfig, ToolsConfig
from klaw.config.web import WebConfig


def _default_models() -> dict[str, ModelConfig]:
    return {"ollama/llama3.2": ModelConfig(base_url="http://localhost:11434/v1", context_budget=8192)}


class EngineConfig(Section):
    """The whole of `engine.yaml`."""

    models: dict[str, ModelConfig] = Field(default_factory=_default_models)
    routing: RoutingConfig = RoutingConfig()
    processing: ProcessingConfig = ProcessingConfig()
    context: ContextConfig = ContextConfig()
    auto_rag: AutoRagConfig = AutoRagConfig()
    summarizer: SummarizerConfig = SummarizerConfig()
    rag: RagConfig = RagConfig()
    search: SearchConfig = SearchConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    database: DatabaseConfig = DatabaseConfig()
    memory: MemoryConfig = MemoryConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    tools: ToolsConfig = ToolsConfig()
    web: WebConfig = WebConfig()
    sandbox: SandboxConfig = SandboxConfig()
    host_exec: HostExecConfig = HostExecConfig()
    commands: tuple[CommandConfig, ...] = Field(default_factory=_default_commands)
    channels: ChannelsConfig = ChannelsConfig()
    mcp: McpConfig = McpConfig()

    @model_validator(mode="after")
    def _routes_name_known_models(self) -> EngineConfig:
        routed = {"routing.default": self.routing.default}
        routed["routing.tasks.summarization"] = self.routing.summarization_model
        routed["routing.tasks.subagent"] = self.routing.subagent_model
        for where, model_id in routed.items():
            if model_id not in self.models:
                known = ", ".join(sorted(self.models)) or "(none)"
                said = f"{where} names model {model_id!r}, which is not under models: ({known})"
                if where == "routing.default" and not self._default_route_was_given():
                    # The person never named this model: say where it came from and what to write.
                    example = f", e.g. routing: {{default: {min(self.models)}}}" if self.models else ""
                    said = (
                        f"routing.default is not set, so it is klaw's built-in default {model_id!r}, which is"
                        f" not under models: ({known}). Set routing.default to one of the models listed"
                        f" there{example}."
                    )
                # `field` lets the loader name the environment variable the value came from
                raise PydanticCustomError("unknown_model", said, {"field": where})
        return self

    def _default_route_was_given(self) -> bool:
        """Whether `routing.default` came from engine.yaml or the environment, not the built-in default."""
        return "routing" in self.model_fields_set and "default" in self.routing.model_fields_set

    @model_validator(mode="after")
    def _enabled_mcp_servers_exist(self) -> EngineConfig:
        lists = {"tools.enabled": self.tools.enabled}
        lists |= {f"models.{model_id}.tools": model.tools for model_id, model in self.models.items() if model.tools}
        for where, names in lists.items():
            for name in names:
                server = name.removeprefix(MCP_GROUP_PREFIX)
                if name.startswith(MCP_GROUP_PREFIX) and server not in self.mcp.servers:
                    known = ", ".join(sorted(self.mcp.servers)) or "none"
                    said = (
                        f"{where} names {name!r}, but mcp.servers has no server {server!r} (configured: {known}):"
                        f" add it under mcp.servers, or take {name!r} out of {where}"
                    )
                    # `field`: the loader names the field (and a variable that set it), not "(top level)"
                    raise PydanticCustomError("unknown_mcp_server", said, {"field": where})
        return self

    @model_validator(mode="after")
    def _telegram_targets_are_allowed_chats(self) -> EngineConfig:
        """A Telegram chat among `tools.messageTargets` must be on the bot's allow-list: the gateway drops
        what is delivered to any other chat, so `message_send` would say "Sent" for a message nobody gets."""
        allowed = self.channels.telegram.allowed_chat_ids
        for target in self.tools.message_targets or ():
            channel, _, chat_id = target.partition(":")
            if channel != "telegram" or (digits(chat_id.strip().removeprefix("-"), 20) and int(chat_id) in allowed):
                continue
            listed = ", ".join(str(chat) for chat in allowed) or "none"
            said = (
                f"tools.messageTargets names {target}, but {chat_id.strip()} is not in"
                f" channels.telegram.allowedChatIds ({listed}), and the Telegram gateway drops anything for a chat"
                f" not there: add {chat_id.strip()} to channels.telegram.allowedChatIds, or take {target} out of"
                " tools.messageTargets"
            )
            raise PydanticCustomError("message_target_not_allowed", said, {"field": "tools.messageTargets"})
        return self

    @property
    def tool_groups(self) -> tuple[str, ...]:
        """Every group some model is offered: `tools.enabled` and each model's own `tools`, in that order."""
        groups = dict.fromkeys(self.tools.enabled)
        for model in self.models.values():
            groups |= dict.fromkeys(model.tools or ())
        return tuple(groups)

    def tools_for(self, model_id: str) -> tuple[str, ...]:
        """The groups `model_id` is offered: its own `tools`, else `tools.enabled`."""
        model = self.models.get(model_id)
        return model.tools if model is not None and model.tools is not None else self.tools.enabled

    def model(self, model_id: str) -> ModelConfig:
        return self.models[model_id]

    def context_budget(self, model_id: str) -> int:
        """The model's context window, else `context.defaultBudgetTokens`."""
        return context_budget(self.models, model_id, self.context.default_budget_tokens)
