"""`klaw chat`'s wait for its MCP servers, taken before its first message to the model instead of at start.

newcomer8 measured `echo /exit | klaw chat` at 22-26 s with the docs' weather server: the engine's start
waited for the server (up to its `startTimeoutSeconds` for a piped chat, decision 252; `startWaitSeconds`,
5 s, at the terminal) before `/exit` was even read, and the prompt came only after it. The chat now starts
its engine with no wait, and `ToolsWait.before_turn` waits what is left of the same bound, counted from the
engine's start, right before the first message that goes to the model: that message has the tools it had
before, while the prompt, `/exit` and the commands (which call no tool) answer at once. Decision 376.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from klaw.cli.context import err_console

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.engine.runtime import Engine


def started_without_waiting(config: EngineConfig) -> EngineConfig:
    """The configuration the chat's engine starts with: the MCP servers are started, not waited for."""
    return config.model_copy(update={"mcp": config.mcp.model_copy(update={"start_wait_seconds": 0.0})})


class ToolsWait:
    """The start wait of a chat's MCP servers, owed once, by the first message to the model."""

    def __init__(self, engine: Engine, wait_seconds: float, *, piped: bool) -> None:
        """`wait_seconds`: the bound the engine's start would have waited (a piped chat's is longer:
        `McpConfig.one_turn_wait_seconds`); counted from now, the engine having just started."""
        self._engine = engine
        self._wait_seconds = wait_seconds
        self._deadline = asyncio.get_running_loop().time() + wait_seconds
        self._piped = piped
        self._owed = True

    @property
    def owed(self) -> bool:
        """True while a server is still starting and the first message has not waited for it yet."""
        return self._owed and bool(self._engine.mcp_servers.still_starting())

    async def before_turn(self) -> None:
        """Wait what is left of the bound for the servers still starting; a piped chat then says on stderr
        which of them its one turn goes without (decision 252)."""
        if not self._owed:
            return
        self._owed = False
        servers = self._engine.mcp_servers
        if not servers.still_starting():
            return
        left = max(0.0, self._deadline - asyncio.get_running_loop().time())
        await servers.wait_started(left, said_seconds=self._wait_seconds)
        if not self._piped or self._wait_seconds == 0:  # 0 was set on purpose: nothing to advise (docs/mcp.md)
            return
        for name in servers.still_starting():
            err_console.print(
                f"MCP server {name} was still starting after {self._wait_seconds:g} s; its tools are missing"
                " from this turn. If it starts, only slowly, raise mcp.startWaitSeconds (e.g."
                " KLAW__MCP__STARTWAITSECONDS=30); if it never starts (klaw tools says), run its command by hand to"
                " see why; KLAW__MCP__STARTWAITSECONDS=0 does not wait for it at all",
                soft_wrap=True,
                highlight=False,
            )
