"""A library program's first `ask` has its MCP servers' tools: `async with Klaw(home)` waits until each
enabled server has started or failed, as a piped `klaw chat` does (decisions 252, 291); and a call to a
tool of a server still starting tells the model so, never "unknown tool" (which says it does not exist)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from klaw import AgentInfo, ChatMessage, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls

SERVER = str(Path(__file__).parent / "tools" / "mcp_client" / "notes_server.py")


def slow_notes(delay: float, **mcp: Any) -> dict[str, Any]:
    """A config enabling the notes server, which sleeps `delay` seconds before it starts."""
    program = (
        f"import runpy, sys, time; time.sleep({delay}); sys.argv = [{SERVER!r}];"
        f" runpy.run_path({SERVER!r}, run_name='__main__')"
    )
    server = {"command": sys.executable, "args": ["-c", program], "startTimeoutSeconds": 90}
    return {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "tools": {"enabled": ["mcp:notes"]},
        "mcp": {"servers": {"notes": server}, **mcp},
    }


def adds(offered: list[list[str]]) -> FunctionModel:
    """A model that calls notes__add(2, 3) and then says what the tool answered; records what it was offered."""

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        offered.append([tool.name for tool in info.tools])
        if messages[-1].role == "tool":
            return f"tool said: {messages[-1].content}"
        return tool_calls(call_tool("notes__add", {"a": 2, "b": 3}))

    return FunctionModel(model)


async def test_the_first_ask_has_a_server_slower_than_the_default_wait(tmp_path: Path) -> None:
    offered: list[list[str]] = []
    async with Klaw(tmp_path / "home", config=slow_notes(6), model=adds(offered)) as agent:
        reply = await agent.ask("alice", "add 2 and 3")
    assert "notes__add" in offered[0]  # the default 5 s wait left it out
    assert reply == "tool said: 5", reply


async def test_a_call_to_a_server_still_starting_says_so(tmp_path: Path) -> None:
    offered: list[list[str]] = []
    config = slow_notes(60, startWaitSeconds=0)  # set on purpose: no wait
    async with Klaw(tmp_path / "home", config=config, model=adds(offered)) as agent:
        reply = await agent.ask("alice", "add 2 and 3")
    assert "notes__add" not in offered[0]
    assert reply == "tool said: the MCP server 'notes' is still starting; try again shortly", reply
