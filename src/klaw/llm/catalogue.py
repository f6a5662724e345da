"""`ModelCatalogue`: the models configured under `models:`, and which of them serves what.

Every place that takes a model id from a person or a model (`/model`, a scheduled task's model,
`subagent_spawn`, `klaw schedule add`, the router) checks it here, so an unknown id is refused in
one way everywhere: `UnknownModelError` (a `ValueError` too), naming the id and the configured ones.
Built from the `models`, `routing` and `context` sections, so the classes that need models take
the catalogue rather than the whole configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from klaw.config import EngineConfig, ModelConfig, RoutingConfig, context_budget
from klaw.llm.errors import UnknownModelError


@dataclass(frozen=True)
class ModelCatalogue:
    models: Mapping[str, ModelConfig]
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    default_budget_tokens: int = 8000  # `context.defaultBudgetTokens`: for models without `contextBudget`

    @classmethod
    def from_config(cls, config: EngineConfig) -> ModelCatalogue:
        return cls(config.models, config.routing, config.context.default_budget_tokens)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every configured model id, sorted (for `/models` and error messages)."""
        return tuple(sorted(self.models))

    def __contains__(self, model_id: object) -> bool:
        return model_id in self.models

    def get(self, model_id: str) -> ModelConfig:
        """The model's configuration; `UnknownModelError` for an id that is not configured."""
        model = self.models.get(model_id)
        if model is None:
            raise UnknownModelError(model_id, self.ids)
        return model

    def check(self, model_id: str | None) -> None:
        """Refuse an id that is not configured (None, "no model chosen", passes)."""
        if model_id is not None:
            self.get(model_id)

    def context_budget(self, model_id: str) -> int:
        """The model's context window, else `context.defaultBudgetTokens`."""
        return context_budget(self.models, model_id, self.default_budget_tokens)
