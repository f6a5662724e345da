"""A model's context budget too small for klaw's system prompt and the model's tools (decision 500).

The schema refuses a budget under 256 tokens (decision 487), but one above that and under what the fixed layers
take passed `klaw config check`: every turn then had no room for any message (the conversation is cut down to
`MIN_ROOM_TOKENS`, decision 488) and the chat was told only at its turn. What those layers take depends on the
workspace's prompt files and the tools each model is offered, so it is computed from them: `klaw config check`
refuses such a budget (exit 2) and an engine's start logs the same words (it starts: a chat on another model is
not concerned, and the turn still tells the chat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from klaw.config import EngineConfig
from klaw.engine.context_cut import MESSAGE_OVERHEAD_TOKENS, MIN_ROOM_TOKENS, SAFETY_MARGIN, tools_tokens
from klaw.engine.system_prompt import SystemPrompt
from klaw.llm.messages import ToolSpec
from klaw.llm.tokens import approximate_token_count
from klaw.log_format import held_back

log = logging.getLogger(__name__)

STEP = 100  # the budget suggested is a multiple of this
MOST = 10_000_000  # the largest budget tried for the suggestion (the schema's bound is far below)


@dataclass(frozen=True, slots=True)
class TooSmall:
    """One model whose budget leaves under `MIN_ROOM_TOKENS` for the conversation, with its figures."""

    model: str
    field: str  # where the budget is set: models.X.contextBudget, or context.defaultBudgetTokens
    budget: int  # as configured
    prompt: int  # the system prompt's tokens at that budget
    tools: int  # the tools' definitions' tokens
    tool_count: int
    needed: int  # the least budget (a multiple of STEP) leaving MIN_ROOM_TOKENS

    def words(self) -> str:
        built = int(self.budget * SAFETY_MARGIN)
        left = built - self.prompt - self.tools
        leaving = f"leaving {left}" if left >= 0 else f"{-left} more than it holds, leaving nothing"
        return (
            f"{self.field} = {self.budget} leaves no room for a message on {self.model}: its context is built in"
            f" {built} tokens ({round(SAFETY_MARGIN * 100)} %), and the system prompt takes {self.prompt},"
            f" the {self.tool_count} tools'"
            f" definitions {self.tools}: {leaving} for the conversation, where a turn needs {MIN_ROOM_TOKENS}."
            f" Raise {self.field} to at least {self.needed}, or offer {self.model} fewer tools"
            f" (tools.enabled, or models.{self.model}.tools); `klaw tools` lists them, /context shows each layer"
        )


def chat_models(config: EngineConfig) -> list[str]:
    """The models a chat's context is built for: routing.default and every configured model a chat may be
    switched to (`/model`), but a model routed to summaries alone (it builds no chat context)."""
    routing = config.routing
    summaries_only = routing.summarization_model if routing.summarization_model != routing.default else None
    return [model for model in dict.fromkeys((routing.default, *config.models)) if model != summaries_only]


def too_small(
    workspace: Path, config: EngineConfig, specs: Callable[[str], Sequence[ToolSpec]], appendix: str | None
) -> list[TooSmall]:
    """Each chat model whose budget leaves the conversation under `MIN_ROOM_TOKENS` once the system prompt
    (the workspace's files, read as a turn reads them, and `appendix`) and its tools are placed; file reads:
    call it off the event loop."""
    with held_back("klaw.engine.system_prompt"):  # a file cut at its cap: each turn says it, not each budget tried
        return _too_small(SystemPrompt(workspace, appendix), config, specs)


def _too_small(
    prompt: SystemPrompt, config: EngineConfig, specs: Callable[[str], Sequence[ToolSpec]]
) -> list[TooSmall]:
    found: list[TooSmall] = []
    for model in chat_models(config):
        configured = config.models.get(model)
        if configured is not None and configured.context_budget:
            budget, field = configured.context_budget, f"models.{model}.contextBudget"
        else:
            budget, field = config.context.default_budget_tokens, "context.defaultBudgetTokens"
        tools = specs(model)
        tokens = tools_tokens(tools)
        taken = _prompt_tokens(prompt, budget, tokens)
        if int(budget * SAFETY_MARGIN) - taken - tokens >= MIN_ROOM_TOKENS:
            continue
        needed = (budget // STEP + 1) * STEP
        while needed < MOST and _room(prompt, needed, tokens) < MIN_ROOM_TOKENS:
            needed += STEP
        found.append(TooSmall(model, field, budget, taken, tokens, len(tools), needed))
    return found


def _room(prompt: SystemPrompt, budget: int, tools: int) -> int:
    return int(budget * SAFETY_MARGIN) - _prompt_tokens(prompt, budget, tools) - tools


def _prompt_tokens(prompt: SystemPrompt, budget: int, tools_tokens: int) -> int:
    """The system prompt's tokens for a context of `budget` (its files are capped by it), as the builder counts."""
    text = prompt.read(int(budget * SAFETY_MARGIN), tools_tokens)[0]
    return approximate_token_count(text) + MESSAGE_OVERHEAD_TOKENS


def log_too_small(found: Sequence[TooSmall]) -> None:
    """The engine's start: each model's words at WARNING (figures only, no content)."""
    for each in found:
        log.warning("context budget: %s", each.words())
