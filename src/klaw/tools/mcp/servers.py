"""The MCP servers `tools.enabled` turns on (`mcp:<name>`): their tools in the registry, their state
for /status, and their life under the engine's exit stack.

A server's tools are registered when it lists them, as `<server>__<tool>` with the server's own JSON
schema, within its budget: `tools` (an allow-list of its names), then at most `maxTools` tools whose
schemas take at most `maxSchemaTokens`, in the server's order; what is left out is said in /status.
A tool a restarted server no longer lists is withdrawn. A server that is down keeps its tools
offered (prompts stay stable): calling one answers that the server is unavailable.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from klaw.config import MCP_GROUP_PREFIX, McpConfig, McpServerConfig
from klaw.llm.tokens import approximate_token_count
from klaw.redaction import mask_url_credentials
from klaw.tools.mcp.names import SEPARATOR, model_names
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

if TYPE_CHECKING:
    # The MCP SDK takes about a second to import (half of every `klaw` command's start-up): it is
    # imported only when tools.enabled names an MCP server (see McpServers.__init__).
    from mcp.types import Tool

    from klaw.tools.mcp.server_link import ServerLink

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerState:
    """One configured MCP server now: `phase` is the link's (`ready`, `unavailable`, `starting`…) or
    `not enabled` when `tools.enabled` does not name it; `tools` the names it offers the model."""

    name: str
    enabled: bool
    phase: str
    reason: str | None = None
    tools: tuple[str, ...] = ()
    left_out: int = 0  # listed by the server, left out by its tools, maxTools or maxSchemaTokens
    retry_in: int | None = None  # seconds until klaw tries it again
    failures: int = 0
    final: bool = False  # engine.yaml's mistake (no such program): not retried; `klaw tools` says failed
    url: str | None = None  # a URL server's address, credentials masked: what to check when it cannot be reached
    silent: bool = False  # its start timed out with nothing in its log: its command is to be run by hand


def server_address(config: McpServerConfig) -> str | None:
    """A URL server's address as it may be shown (credentials in it masked); None for a command."""
    return None if config.url is None else mask_url_credentials(config.url)


class McpServers:
    def __init__(
        self,
        config: McpConfig,
        enabled: Sequence[str],
        registry: ToolRegistry,
        *,
        now: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]],
        monotonic: Callable[[], float],
        workspace: Path,
        log_dir: Path,
    ) -> None:
        """`enabled`: `tools.enabled`; only the servers it names as mcp:<name> are started."""
        self._config = config
        self._registry = registry
        self._now = now
        wanted = {name.removeprefix(MCP_GROUP_PREFIX) for name in enabled if name.startswith(MCP_GROUP_PREFIX)}
        if wanted:
            from klaw.tools.mcp.server_link import ServerLink  # the SDK, only when a server is wanted
        self._links = {
            name: ServerLink(
                name,
                server,
                now=now,
                sleep=sleep,
                monotonic=monotonic,
                workspace=workspace,
                log_dir=log_dir,
                check_interval_seconds=config.check_interval_seconds,
                on_tools=lambda tools, name=name, server=server: self._offer(name, server, tools),  # type: ignore[misc]
            )
            for name, server in config.servers.items()
            if name in wanted
        }
        self._offered: dict[str, list[str]] = {name: [] for name in self._links}
        self._left_out: dict[str, int] = {name: 0 for name in self._links}
        if self._links:
            registry.explain_missing(self._why_missing)

    @property
    def links(self) -> dict[str, ServerLink]:
        return self._links

    async def start(self) -> None:
        """Start every enabled server; wait at most `startWaitSeconds` for them (slower ones join later). A
        server still starting after the wait is no fault (a Python server takes 5-8 s on a busy machine):
        an info line, not a warning a person reads as breakage (decision 315). One that fails, or is still
        not ready after its `startTimeoutSeconds`, is warned about by its link; /status shows it starting."""
        for link in self._links.values():
            link.start()
        await self.wait_started(self._config.start_wait_seconds)

    async def wait_started(self, wait_seconds: float, said_seconds: float | None = None) -> None:
        """Until every server has started or failed, at most `wait_seconds`: `start`'s wait, or `klaw chat`'s
        before its first message to the model, when it started with none so that its prompt, `/exit` and
        the commands answer at once (decision 376). `said_seconds`: the whole wait, for the log line, when
        part of it passed before this call."""
        if self._links and wait_seconds > 0 and self.still_starting():
            waits = [asyncio.ensure_future(link.settled.wait()) for link in self._links.values()]
            _, pending = await asyncio.wait(waits, timeout=wait_seconds)
            for wait in pending:
                wait.cancel()
        said = wait_seconds if said_seconds is None else said_seconds
        for name in self.still_starting() if said > 0 else ():
            log.info(
                "MCP server %r was still starting after %g s; its tools join the turns once it is ready", name, said
            )

    def still_starting(self) -> list[str]:
        """The enabled servers whose first start has not ended yet (neither ready nor failed)."""
        return [name for name, link in self._links.items() if not link.settled.is_set()]

    async def aclose(self) -> None:
        await asyncio.gather(*(link.aclose() for link in self._links.values()))

    def states(self) -> list[ServerState]:
        """Each configured server as it is now: enabled or not, its phase and tools (`klaw tools`, /status)."""
        states = []
        for name in self._config.servers:
            link = self._links.get(name)
            if link is None:
                states.append(ServerState(name, enabled=False, phase="not enabled"))
                continue
            status = link.status()
            retry_in = None
            if status.retry_at is not None:
                retry_in = max(0, round((status.retry_at - self._now()).total_seconds()))
            states.append(
                ServerState(
                    name,
                    enabled=True,
                    phase=status.phase,
                    reason=status.reason,
                    tools=tuple(self._offered[name]),
                    left_out=self._left_out[name],
                    retry_in=retry_in,
                    failures=status.failures,
                    final=status.final,
                    url=server_address(link.config),
                    silent=status.silent,
                )
            )
        return states

    def status_lines(self) -> list[str]:
        """One line per configured server for /status: ready with its tools, or why not and when klaw retries."""
        lines = []
        for state in self.states():
            name = state.name
            if not state.enabled:
                lines.append(f"MCP {name}: configured, not enabled (add {MCP_GROUP_PREFIX}{name} to tools.enabled)")
            elif state.phase == "ready":
                line = f"MCP {name}: ready, {len(state.tools)} tool(s)"
                if state.left_out:
                    line += f" ({state.left_out} more left out by tools, maxTools or maxSchemaTokens)"
                lines.append(line)
            elif state.phase == "unavailable":
                line = f"MCP {name}: unavailable, {state.reason}"
                if state.retry_in is not None:
                    line += f"; {retry_words(state.retry_in)} ({failed_starts(state.failures)})"
                elif state.final:
                    line += "; not retried: fix it, then restart klaw"
                lines.append(line)
            else:
                lines.append(f"MCP {name}: {state.phase}")
        return lines

    def _offer(self, server: str, config: McpServerConfig, tools: Sequence[Tool]) -> None:
        """(Re-)register what the server lists, within its budget; withdraw what it no longer lists."""
        listed = [tool for tool in tools if config.tools is None or tool.name in config.tools]
        chosen: list[tuple[str, Tool]] = []
        tokens = 0
        for model_name, tool in zip(model_names(server, [t.name for t in listed]), listed, strict=True):
            cost = approximate_token_count(json.dumps([model_name, tool.description or "", tool.input_schema]))
            if len(chosen) == config.max_tools or tokens + cost > config.max_schema_tokens:
                continue
            tokens += cost
            chosen.append((model_name, tool))
        for old in set(self._offered[server]) - {name for name, _ in chosen}:
            self._registry.remove(old)
        for model_name, tool in chosen:
            self._registry.register_schema(
                model_name,
                f"[{server}] {tool.description or tool.name}",
                tool.input_schema,
                self._caller(server, tool.name),
                replace=True,
            )
        self._offered[server] = [name for name, _ in chosen]
        self._left_out[server] = len(tools) - len(chosen)
        if self._left_out[server]:
            log.warning("MCP server %r: %d tool(s) left out by its budget", server, self._left_out[server])

    def _why_missing(self, tool: str) -> str | None:
        """For a call to `<server>__…` that the server has not offered yet (it is still starting, or has
        not started at all): why, rather than "unknown tool", which would tell the model it does not exist."""
        for name, link in self._links.items():
            if tool.startswith(f"{name}{SEPARATOR}") and not self._offered[name] and link.status().phase != "ready":
                return link.unavailable()
        return None

    def _caller(self, server: str, tool: str) -> Callable[[dict[str, Any], ToolContext], Awaitable[str]]:
        link = self._links[server]

        async def call(arguments: dict[str, Any], _context: ToolContext) -> str:
            return await link.call(tool, arguments)

        return call


def retry_words(seconds: int) -> str:
    """When klaw tries the server again: "retry in 0 s" read as a broken count (newcomer23, decision 527)."""
    return f"retry in {seconds} s" if seconds > 0 else "retrying now"


def failed_starts(failures: int) -> str:
    """ "1 failed attempt so far", where "(failure 1)" read as a code."""
    return f"{failures} failed attempt{'s' if failures != 1 else ''} so far"
