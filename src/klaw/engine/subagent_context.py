"""A subagent run's context: system prompt, the task note, core memory (not for a run holding allowed
tools: decision 217), the task's past runs, the request, tools (docs/decisions/003-subagent-runs.md).

Unlike a chat turn it has no sliding window, no summary and no auto-RAG: its history is the last
`context.subagentHistory` *completed runs* of the same task, read whole from the task's JSONL log by
`SubagentHistoryLoader` (never from the database). Runs are never cut in the middle; if the last N
runs do not fit the budget, the oldest whole runs are left out, with a warning, rather than sending
a context the model would reject.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from klaw.config import ContextConfig
from klaw.engine.context_builder import (
    MESSAGE_OVERHEAD_TOKENS,
    SAFETY_MARGIN,
    BuiltContext,
    ContextLayer,
    fit_newest,
    tools_layer,
)
from klaw.engine.system_prompt import SystemPrompt
from klaw.engine.transcript import paired_tool_messages, record_to_chat_message
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.messages import ChatMessage, ToolSpec
from klaw.llm.tokens import approximate_token_count
from klaw.memory.core_memory import CoreMemory
from klaw.memory.subagent_history import Run, SubagentHistoryLoader

log = logging.getLogger(__name__)

SILENT_REPLY = '{"silent": true}'


def task_note(task_name: str) -> str:
    """What the model must know to run a task well: it is alone, and how to stay silent."""
    return (
        f"You are running the scheduled task '{task_name}' on your own, in the background: no person is "
        "reading along. Earlier runs of this task follow, oldest first, then this run's request. Your final "
        f"answer is sent to the person the task reports to. If there is nothing worth telling them, answer exactly "
        f"{SILENT_REPLY} and nothing is sent."
    )


@dataclass(frozen=True, eq=False)
class SubagentContextBuilder:
    """`catalogue` gives each model's context budget; `config` is the `context` section."""

    catalogue: ModelCatalogue
    config: ContextConfig
    system_prompt: SystemPrompt
    core_memory: CoreMemory
    history: SubagentHistoryLoader
    tools: Callable[[str], Sequence[ToolSpec]] = lambda _model: ()

    async def build(
        self,
        task_name: str,
        request: str,
        model_id: str,
        *,
        history_of: str | None = None,
        core_memory: bool = True,
    ) -> BuiltContext:
        """`history_of`: the log whose runs are its history (`spawn:<task>` for a spawned run, decision
        217); the task's own by default. `core_memory=False` for a run holding pre-approved tools: any
        chat's model can write core memory, and such a run must read no text a chat chose (decision 217)."""
        budget = int(self.catalogue.context_budget(model_id) * SAFETY_MARGIN)
        head: list[ChatMessage] = []
        layers: list[ContextLayer] = []
        warnings: list[str] = []

        def place(name: str, text: str | None) -> None:
            if text:
                head.append(ChatMessage.system(text))
                layers.append(ContextLayer(name, approximate_token_count(text) + MESSAGE_OVERHEAD_TOKENS))

        tools = list(self.tools(model_id))
        tools_tokens = tools_layer(tools).tokens
        place("system_prompt", await self.system_prompt.text(budget, tools_tokens))
        place("task", task_note(task_name))
        memory = await self.core_memory.read() if core_memory else None
        place("core_memory", f"Core memory (read-only here):\n{CoreMemory.render(memory)}" if memory else None)
        pending_tokens = approximate_token_count(request) + MESSAGE_OVERHEAD_TOKENS
        room = budget - sum(layer.tokens for layer in layers) - tools_tokens - pending_tokens

        past = await self.history.load_runs(history_of or task_name, self._subagent_history)
        runs = [_run_messages(run) for run in past]
        kept = fit_newest(runs, _run_tokens, room)  # whole runs, never cut
        if len(kept) < len(runs):
            warning = f"only the last {len(kept)} of {len(runs)} runs fit the {budget}-token budget"
            log.warning("context for task %s: %s", task_name, warning)
            warnings.append(warning)
        history = [message for run in kept for message in run]
        layers.append(ContextLayer("subagent_history", sum(_tokens(m) for m in history), len(kept)))
        if tools:
            layers.append(tools_layer(tools))
        layers.append(ContextLayer("pending", pending_tokens))
        return BuiltContext(
            messages=[*head, *history, ChatMessage.user(request)],
            tools=tools,
            layers=layers,
            budget=budget,
            warnings=warnings,
        )

    @property
    def _subagent_history(self) -> int:
        return self.config.subagent_history


def _run_messages(run: Run) -> list[ChatMessage]:
    return paired_tool_messages([m for m in (record_to_chat_message(r) for r in run) if m is not None])


def _tokens(message: ChatMessage) -> int:
    return approximate_token_count(json.dumps(message.to_wire(), ensure_ascii=False)) + MESSAGE_OVERHEAD_TOKENS


def _run_tokens(run: Sequence[ChatMessage]) -> int:
    return sum(_tokens(m) for m in run)
