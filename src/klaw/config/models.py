"""The chat models (`models:`) and which one serves what (`routing:`), and a model's context budget."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from klaw.config.base import ApiKeyEnv, BaseUrl, BudgetTokens, Section
from klaw.config.tools import ToolGroupNames


class ModelConfig(Section):
    """One chat model reachable through an OpenAI-compatible endpoint."""

    base_url: BaseUrl = Field(description="OpenAI-compatible base URL, e.g. http://localhost:11434/v1")
    api_key_env: ApiKeyEnv | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key)."
    )
    name: str | None = Field(
        default=None,
        description="Model name sent to the provider; default: the id without its 'provider/' prefix.",
    )
    context_budget: BudgetTokens | None = Field(
        default=None,
        description="Context window in tokens (klaw's system prompt and tools alone take about 2,000).",
    )
    timeout_seconds: float = Field(default=120.0, gt=0)
    total_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="Longest a whole model call may take, retries and a streamed answer included; null = ten"
        " times timeoutSeconds. A server that keeps sending a byte now and then never reaches timeoutSeconds.",
    )
    connect_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Longest wait to connect (at most timeoutSeconds): a server whose packets are dropped is"
        " found out in seconds, not after timeoutSeconds per attempt.",
    )
    max_retries: int = Field(default=3, ge=0)
    tools: ToolGroupNames | None = Field(
        default=None,
        description="Tool groups this model is offered instead of tools.enabled (a small local model gets fewer);"
        " null = tools.enabled.",
    )

    @property
    def call_deadline_seconds(self) -> float:
        """`totalTimeoutSeconds`, or ten times `timeoutSeconds` (decision 298)."""
        return self.total_timeout_seconds if self.total_timeout_seconds is not None else 10 * self.timeout_seconds

    def provider_model_name(self, model_id: str) -> str:
        """The name the provider knows this model by (`ollama/llama3.2` → `llama3.2`)."""
        if self.name:
            return self.name
        _, sep, rest = model_id.partition("/")
        return rest if sep else model_id


class RoutingTasks(Section):
    summarization: str | None = None
    subagent: str | None = None


class RoutingConfig(Section):
    default: str = "ollama/llama3.2"
    tasks: RoutingTasks = RoutingTasks()

    @property
    def summarization_model(self) -> str:
        return self.tasks.summarization or self.default

    @property
    def subagent_model(self) -> str:
        return self.tasks.subagent or self.default


def context_budget(models: Mapping[str, ModelConfig], model_id: str, default_budget_tokens: int) -> int:
    """The model's `contextBudget`, else `default_budget_tokens` (`context.defaultBudgetTokens`)."""
    model = models.get(model_id)
    if model is not None and model.context_budget:
        return model.context_budget
    return default_budget_tokens
