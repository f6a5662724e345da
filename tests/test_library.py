"""The library API: docs/library.md's example runs as written, and `Klaw` serves turns with memory,
tools and commands through the real turn path."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import klaw
from klaw import (
    AgentInfo,
    ChatMessage,
    ChatRef,
    ChatResponse,
    ConfigError,
    FunctionModel,
    Klaw,
    ManualClock,
    TurnFailed,
    call_tool,
    tool_calls,
)

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


RUN_EACH = """
import contextlib, io, json, sys
outputs = []
for block in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            exec(compile(block, "<docs/library.md>", "exec"), {"__name__": "__main__"})
        except BaseException:
            sys.stderr.write(block)
            raise
    outputs.append(out.getvalue())
print(json.dumps(outputs))
"""


def test_the_documented_example_runs() -> None:
    text = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    # every snippet of the page is a whole program, runnable as copied (before: fragments with a top-level
    # `await`, an undefined `home` and `asyncio`, written as ```py and never run)
    assert "```py\n" not in text.split("## Tools from an installed package")[0]
    # one process runs them all, each in globals of its own (a process each cost ~1.5 s of imports apiece)
    done = subprocess.run(
        [sys.executable, "-c", RUN_EACH, json.dumps(blocks)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    outputs = json.loads(done.stdout)
    lines = outputs[0].splitlines()
    assert lines[0] == "The forecast says: light rain in Oslo, 9 °C"
    assert any("model" in line.lower() for line in lines[1:])  # /status answered
    assert outputs[1] == "the model server is down or busy: ask again later\n"
    assert outputs[2] == "You said: hello\n"  # one asyncio.Runner across a script's steps (decision 538)
    assert outputs[3] == "Light rain in Oslo, 9 °C.\n" * 2  # the pieces as they came, then the reply (stream)
    assert "trains trains to Bergen leave at 08:25 and 15:58" in outputs[4]
    assert "['completed']" in outputs[5]


def test_the_curated_names_are_exported() -> None:
    """The public API is this list, no more and no less: a change to it is a change to docs/library.md."""
    assert klaw.__all__ == [
        "AgentInfo",
        "AgentMessage",
        "ChatMessage",
        "ChatModel",
        "ChatRef",
        "ChatResponse",
        "Clock",
        "ConfigError",
        "Embedder",
        "EmbedderError",
        "EngineAlreadyRunningError",
        "EngineConfig",
        "EngineNotOpen",
        "ForgetError",
        "FunctionModel",
        "HistoryEntry",
        "HomeUnusable",
        "InvalidArgument",
        "InvalidChat",
        "Klaw",
        "KlawError",
        "KlawHome",
        "LlmAuthError",
        "LlmBadRequestError",
        "LlmConnectionError",
        "LlmError",
        "LlmMalformedResponseError",
        "LlmRateLimitError",
        "LlmServerError",
        "LlmTimeoutError",
        "ManualClock",
        "MemoryFound",
        "MessageRefused",
        "OtherEventLoop",
        "OwnTurnRunning",
        "ReplyPiece",
        "ReplyStream",
        "SessionInfo",
        "StorageError",
        "StorageUnavailable",
        "StreamAccumulator",
        "StreamDelta",
        "SystemClock",
        "TaskRun",
        "TaskRunRefused",
        "ToolCall",
        "ToolCallFragment",
        "ToolContext",
        "ToolDefinitionError",
        "ToolFunction",
        "ToolRow",
        "ToolSetup",
        "ToolSpec",
        "TurnFailed",
        "TurnState",
        "Usage",
        "__version__",
        "call_tool",
        "private_open",
        "requires_approval",
        "tool_calls",
    ]
    page = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    for name in klaw.__all__:
        assert getattr(klaw, name) is not None
        assert name == "__version__" or f"`{name}`" in page or f"{name}(" in page, f"{name} is not in docs/library.md"
    assert klaw.Klaw.__doc__
    with pytest.raises(AttributeError):
        getattr(klaw, "Engine")  # noqa: B009 - internal, not exported


async def test_ask_remembers_within_the_chat_and_keeps_chats_apart(tmp_path: Path) -> None:
    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        said = [m.content or "" for m in messages if m.role == "user"]
        return " | ".join(said)

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        assert await agent.ask("alice", "my cat is called Miso") == "my cat is called Miso"
        assert await agent.ask("alice", "what is my cat called?") == "my cat is called Miso | what is my cat called?"
        assert await agent.ask("bob", "hello") == "hello"
        concurrent = await asyncio.gather(agent.ask("carol", "one"), agent.ask("dave", "two"))
        assert list(concurrent) == ["one", "two"]
    # Durable: a second engine on the same home has alice's conversation.
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        assert (await agent.ask("alice", "and now?")).startswith("my cat is called Miso")


async def test_a_failed_turn_raises_with_the_error_id_and_the_next_ask_works(tmp_path: Path) -> None:
    failures = [RuntimeError("a bug in someone's model code")]

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        if failures:
            raise failures.pop()
        return "fine"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        with pytest.raises(TurnFailed, match=r"could not answer.*\(error [0-9a-f]{12}\)"):
            await agent.ask("alice", "hello")
        assert await agent.ask("alice", "again") == "fine"


async def test_a_held_tool_is_asked_of_the_approve_callback_and_denied_without_one(tmp_path: Path) -> None:
    ran: list[str] = []

    async def host_exec(command: str) -> str:
        """Run a command on the host."""
        ran.append(command)
        return "ok"

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if messages[-1].role == "user":
            return tool_calls(call_tool("host_exec", {"command": "uptime"}))
        return f"tool said: {messages[-1].content}"

    asked: list[tuple[ChatRef, str]] = []

    async def approve(chat: ChatRef, question: str) -> bool:
        asked.append((chat, question))
        return True

    config = {**CONFIG, "tools": {"approval": ["host_exec"]}}
    home = tmp_path / "home"
    async with Klaw(home, config=config, model=FunctionModel(model), tools=[host_exec], approve=approve) as agent:
        assert await agent.ask("alice", "how long has it been up?") == "tool said: ok"
    assert ran == ["uptime"]
    [(chat, question)] = asked
    assert chat == ChatRef("library", "alice")
    # What the program reads: the tool and each argument by name, not the /approve line a person types.
    assert question == "The agent wants to run host_exec:\n```\ncommand: uptime\n```"

    # Without a callback nobody can say yes: not run at once, not after the approval timeout (nor "denied": 538)
    async with Klaw(home, config=config, model=FunctionModel(model), tools=[host_exec], clock=ManualClock()) as agent:
        answer = await asyncio.wait_for(agent.ask("alice", "and now?"), 10)
    assert answer.startswith("tool said: Not run: host_exec needs the person's approval, and nobody was asked"), answer
    assert ran == ["uptime"]


async def test_a_chat_is_read_back_as_a_person_saw_it(tmp_path: Path) -> None:
    """history, turns, sessions, search_memory and core_memory: what a program may read without internals."""

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str | ChatResponse:
        last = messages[-1]
        if last.role == "tool":
            return "saved"
        if last.content == "remember the gate code":
            return tool_calls(call_tool("memory_save", {"text": "the gate code is 2468"}))
        if last.content == "and that I live in Porto":
            return tool_calls(call_tool("memory_core_update", {"set": {"city": "Porto"}}))
        raise RuntimeError("a bug in the model")

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        assert await agent.history("alice") == [] and await agent.sessions("alice") == []
        await agent.ask("alice", "remember the gate code")
        await agent.ask("alice", "and that I live in Porto")
        with pytest.raises(TurnFailed):
            await agent.ask("alice", "one more")
        history = await agent.history("alice")
        assert [(m.role, m.type) for m in history][:4] == [
            ("user", "text"),
            ("assistant", "tool_call"),
            ("tool", "tool_result"),
            ("assistant", "text"),
        ]
        assert history[0].text == "remember the gate code" and history[-1].text == "one more"
        [asked] = history[1].tool_calls  # a tool call without words says what it asked for
        assert (asked.name, json.loads(asked.arguments)) == ("memory_save", {"text": "the gate code is 2468"})
        assert history[2].tool == "memory_save" and history[2].tool_calls == ()
        assert history[0].tool_calls == () and history[0].tool is None
        turns = await agent.turns("alice")
        assert [t.status for t in turns] == ["completed", "completed", "failed"]
        assert turns[0].message == history[0].id and turns[0].reply == history[3].id
        [found] = await agent.saved_memories("alice", "gate code")
        assert found.kind == "memory" and found.text == "the gate code is 2468"
        assert await agent.core_memory() == {"city": "Porto"}
        [first] = await agent.sessions("alice")
        await agent.ask("alice", "/new")
        assert await agent.history("alice") == []
        assert [s.id for s in await agent.sessions("alice")] == [first.id, first.id + 1]
        assert len(await agent.history("alice", session=first.id)) == len(history)
        assert await agent.history("bob") == []


async def test_a_bad_config_dict_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    config = {"embedder": {"backend": "fake", "dim": "many"}, "sumarizer": {}}
    with pytest.raises(ConfigError) as raised:
        async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda m, i: "hi")):
            pass
    assert str(raised.value).splitlines()[0] == "Invalid configuration in the config= given to Klaw:"
    assert "  - embedder.dim = 'many'" in str(raised.value) and "  - sumarizer: unknown field" in str(raised.value)
