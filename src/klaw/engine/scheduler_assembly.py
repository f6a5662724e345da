"""Assembling scheduled tasks and subagents on the engine's parts (called from `Engine.start`).

Kept out of runtime.py so the engine's assembly stays one screen: the history loader, the subagent
context, the runner (sharing the engine's LLM slots, model router, tools and delivery), the
scheduler on `scheduler.db`. Its tools come through the tool groups (klaw/tools/builtin/groups.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from klaw.config import EngineConfig
from klaw.engine.clock import Clock
from klaw.engine.delivery import Delivery
from klaw.engine.processor import MessageProcessor
from klaw.engine.scheduler_loop import Scheduler
from klaw.engine.subagent_context import SubagentContextBuilder
from klaw.engine.subagents import SubagentRunner
from klaw.engine.system_prompt import SystemPrompt
from klaw.engine.turn_runner import TurnRunner
from klaw.home import KlawHome
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.messages import ToolSpec
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.core_memory import CoreMemory
from klaw.memory.subagent_history import SubagentHistoryLoader
from klaw.scheduling.task_store import ScheduleStore
from klaw.tools.registry import ToolRegistry

# Tools a task's run is not offered: a run that starts runs or adds tasks could multiply without bound, a
# run that removes tasks could delete the person's own (decision 372: it may list them), and a run has no
# conversation of its own to search or save into, and reads core memory only. A run's call to one of them
# gets "unknown tool", the run's tools listed: the tool loop's one rule (decision 258).
SUBAGENT_EXCLUDED_TOOLS = frozenset(
    {
        "subagent_spawn",
        "schedule_add",
        "schedule_remove",
        "fetch_conversation_details",
        "memory_save",
        "memory_search",
        "memory_core_update",
    }
)


def assemble_scheduler(
    *,
    config: EngineConfig,
    home: KlawHome,
    catalogue: ModelCatalogue,
    turns: TurnRunner,
    tools: ToolRegistry,
    processor: MessageProcessor,
    log: ConversationLog,
    core_memory: CoreMemory,
    delivery: Delivery,
    clock: Clock,
    specs_for: Callable[[str], Sequence[ToolSpec]] | None = None,
) -> Scheduler:
    """The scheduler (not started) with its runner (its tools are the `scheduler` and `subagents` groups')."""
    history = SubagentHistoryLoader(home.conversations)

    def subagent_tools(model_id: str) -> list[ToolSpec]:
        offered = tools.specs() if specs_for is None else specs_for(model_id)
        return [spec for spec in offered if spec.name not in SUBAGENT_EXCLUDED_TOOLS]

    runner = SubagentRunner(
        config=config,
        catalogue=catalogue,
        turns=turns,
        slots=processor.slots,
        context=SubagentContextBuilder(
            catalogue, config.context, SystemPrompt(home.workspace), core_memory, history, subagent_tools
        ),
        conversation_log=log,
        history=history,
        inject=processor.inject,
        delivery=delivery,
        clock=clock,
    )
    scheduler = Scheduler(
        config=config.scheduler,
        catalogue=catalogue,
        store=ScheduleStore(home.scheduler_db),
        runner=runner,
        clock=clock,
        unserved=lambda chat: config.channels.telegram.unserved(chat.chat_id) if chat.channel == "telegram" else None,
    )
    return scheduler
