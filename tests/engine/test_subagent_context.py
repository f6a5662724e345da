"""A subagent's context (docs/decisions/003-subagent-runs.md): system prompt, task note,
core memory, the last completed runs from the task's JSONL, the request, tools. No window, no auto-RAG."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from klaw.config import EngineConfig
from klaw.engine.subagent_context import SubagentContextBuilder
from klaw.engine.system_prompt import SystemPrompt
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.messages import ChatMessage, ToolSpec
from klaw.memory.auto_rag import HEADER as AUTO_RAG_HEADER
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.core_memory import CoreMemory
from klaw.memory.subagent_history import Run, SubagentHistoryLoader
from klaw.scheduling.names import task_chat
from klaw.store.records import MessageRecord, MessageType, Role

TASK = "daily-summary"
T0 = datetime(2026, 2, 23, 8, tzinfo=UTC)
CLOCK_TOOL = ToolSpec("current_time", "The time.", {"type": "object", "properties": {}})


class SpyLoader(SubagentHistoryLoader):
    def __init__(self, conversations: Path) -> None:
        super().__init__(conversations)
        self.calls: list[tuple[str, int]] = []

    async def load_runs(self, task_name: str, n: int) -> list[Run]:
        self.calls.append((task_name, n))
        return await super().load_runs(task_name, n)


def config(**context: int) -> EngineConfig:
    return EngineConfig.model_validate(
        {
            "models": {"m/small": {"baseUrl": "http://127.0.0.1:9/v1", "contextBudget": 4000}},
            "routing": {"default": "m/small"},
            "context": {"subagentHistory": 2, **context},
        }
    )


async def write_runs(conversations: Path, count: int, *, words: int = 1) -> None:
    chat = task_chat(TASK)
    log = ConversationLog(conversations)
    for i in range(count):
        at = T0 + timedelta(days=i)
        await log.append(MessageRecord(chat, Role.USER, f"summarise day {i}", created_at=at))
        await log.append(MessageRecord(chat, Role.ASSISTANT, " ".join([f"summary{i}"] * words), created_at=at))


def builder(
    tmp_path: Path, cfg: EngineConfig | None = None, tools: list[ToolSpec] | None = None
) -> SubagentContextBuilder:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "SOUL.md").write_text("You are Soul.", encoding="utf-8")
    loaded = cfg or config()
    return SubagentContextBuilder(
        ModelCatalogue.from_config(loaded),
        loaded.context,
        SystemPrompt(workspace),
        CoreMemory(tmp_path / "core_memory.json"),
        SpyLoader(tmp_path / "conversations"),
        lambda _model: list(tools or []),
    )


def texts(messages: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in messages]


async def test_subagent_context_uses_the_history_loader_not_a_chat_window(tmp_path: Path) -> None:
    """The builder has no store at all: its history can only come from the task's JSONL."""
    await write_runs(tmp_path / "conversations", 3)
    built = builder(tmp_path)
    await built.build(TASK, "summarise today", "m/small")
    loader = built.history
    assert isinstance(loader, SpyLoader)
    assert loader.calls == [(TASK, 2)]  # context.subagentHistory


async def test_subagent_context_has_no_auto_rag_block(tmp_path: Path) -> None:
    await write_runs(tmp_path / "conversations", 5)
    context = await builder(tmp_path).build(TASK, "summarise today", "m/small")
    assert not any(AUTO_RAG_HEADER in text for text in texts(context.messages))
    assert [layer.name for layer in context.layers] == [
        "system_prompt",
        "task",
        "subagent_history",
        "pending",
    ]
    assert context.recalled == [] and context.window_rowids == frozenset()


async def test_subagent_context_includes_history_messages_from_loader(tmp_path: Path) -> None:
    (tmp_path / "core_memory.json").write_text(json.dumps({"name": "Ada"}), encoding="utf-8")
    await write_runs(tmp_path / "conversations", 3)
    context = await builder(tmp_path, tools=[CLOCK_TOOL]).build(TASK, "summarise today", "m/small")
    roles = [m.role for m in context.messages]
    assert roles == ["system", "system", "system", "user", "assistant", "user", "assistant", "user"]
    assert texts(context.messages)[0] == "You are Soul."
    assert "scheduled task 'daily-summary'" in texts(context.messages)[1]
    assert '{"silent": true}' in texts(context.messages)[1]
    assert "read-only" in texts(context.messages)[2] and '"name": "Ada"' in texts(context.messages)[2]
    # The last two complete runs, oldest first, then the request.
    runs = ["summarise day 1", "summary1", "summarise day 2", "summary2"]
    assert texts(context.messages)[3:] == [*runs, "summarise today"]
    assert context.tools == [CLOCK_TOOL]
    history = next(layer for layer in context.layers if layer.name == "subagent_history")
    assert history.items == 2


async def test_subagent_context_with_empty_history_has_only_system_and_pending(tmp_path: Path) -> None:
    context = await builder(tmp_path).build(TASK, "first run ever", "m/small")
    assert [m.role for m in context.messages] == ["system", "system", "user"]
    assert context.messages[-1].content == "first run ever"


async def test_tool_calls_of_past_runs_are_sent_paired(tmp_path: Path) -> None:
    chat = task_chat(TASK)
    log = ConversationLog(tmp_path / "conversations")
    calls = {"tool_calls": [{"id": "c1", "name": "current_time", "arguments": "{}"}]}
    for record in (
        MessageRecord(chat, Role.USER, "what time", created_at=T0),
        MessageRecord(chat, Role.ASSISTANT, "", type=MessageType.TOOL_CALL, metadata=calls, created_at=T0),
        MessageRecord(
            chat, Role.TOOL, "08:00", type=MessageType.TOOL_RESULT, metadata={"tool_call_id": "c1"}, created_at=T0
        ),
        MessageRecord(chat, Role.ASSISTANT, "eight", created_at=T0),
    ):
        await log.append(record)
    context = await builder(tmp_path).build(TASK, "again", "m/small")
    wire = [m.to_wire() for m in context.messages[2:]]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "assistant", "user"]
    assert wire[1]["tool_calls"][0]["id"] == "c1" and wire[2]["tool_call_id"] == "c1"


async def test_runs_that_do_not_fit_the_budget_are_left_out_whole_oldest_first(tmp_path: Path) -> None:
    """No trimming inside a run: the oldest whole runs give way, with a warning."""
    await write_runs(tmp_path / "conversations", 3, words=600)  # ~1350 tokens per answer, budget 3600
    context = await builder(tmp_path, config(subagentHistory=3)).build(TASK, "today", "m/small")
    assert texts(context.messages)[2:-1] == [
        "summarise day 1",
        " ".join(["summary1"] * 600),
        "summarise day 2",
        " ".join(["summary2"] * 600),
    ]
    assert context.warnings == ["only the last 2 of 3 runs fit the 3600-token budget"]
    assert context.total_tokens <= context.budget


@pytest.mark.parametrize("history", [1, 5])
async def test_the_number_of_runs_follows_subagent_history(tmp_path: Path, history: int) -> None:
    await write_runs(tmp_path / "conversations", 4)
    context = await builder(tmp_path, config(subagentHistory=history)).build(TASK, "today", "m/small")
    assert sum(1 for m in context.messages if m.role == "assistant") == min(history, 4)
