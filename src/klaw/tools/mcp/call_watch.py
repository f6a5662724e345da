"""Whether an MCP server is still there while one of its calls waits: the call is raced against its end.

A server can be gone with nothing on the wire to say so. The SDK (2.3) ends a pending call when the server's
stdout ends, but a server written with the SDK whose tool calls `sys.exit(3)` does not end its process: its
event loop stops, and its process lingers with stdout open (its stdin reader thread keeps it alive) until
klaw closes its stdin. The call then waited its whole `timeoutSeconds` (30 s) and was said to be "abandoned
(it may still have acted)" (newcomer22). So, while a call waits, klaw watches two things (decision 514):

- the process's exit (stdio_lines.py tells it): the call ends at once, the server stopped;
- after `CALL_PROBE_AFTER_SECONDS`, and then every `CALL_PROBE_EVERY_SECONDS`, a tool-list request, which
  the SDK's server answers while a tool runs: no answer within the probe's bound (10 s), or the connection
  closed, and the server is taken for stopped. This is the test klaw's idle check already applies every
  60 s: a tool that blocks its server's whole event loop for longer than that is restarted by either,
  mid-call now rather than by chance.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, CallToolResult

from klaw.cancellation import cancel_and_wait
from klaw.tools.mcp.results import describe

CALL_PROBE_AFTER_SECONDS = 2.0
CALL_PROBE_EVERY_SECONDS = 3.0

Gone = tuple[str, str]  # what the server did ("stopped", "stopped answering"), and a detail in brackets or ""


async def race(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    exited: asyncio.Event,
    probe_bound: float,
    exit_status: Callable[[], int | None],
) -> tuple[CallToolResult | None, Gone | None]:
    """The call's result, or what happened to the server when it went first. What the call raises is raised."""
    call = asyncio.ensure_future(client.call_tool(tool, arguments))
    watch = asyncio.ensure_future(_watch(client, exited, probe_bound, exit_status))
    try:
        done, _ = await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(*(task for task in (call, watch) if not task.done()))
    if call in done:
        return call.result(), None
    return None, watch.result()


def exit_words(status: int | None) -> str:
    """How a process's exit status is said, in brackets after what the server did ("" when unknown)."""
    if status is None:
        return ""
    if status < 0:
        return f" (killed by signal {-status})"
    return f" (it exited with status {status})"


async def _watch(
    client: Client, exited: asyncio.Event, probe_bound: float, exit_status: Callable[[], int | None]
) -> Gone:
    """What happened, once the server is gone while a call waits; never returns while it lives."""
    gone = asyncio.ensure_future(exited.wait())
    try:
        pause = CALL_PROBE_AFTER_SECONDS
        while not await _first(gone, asyncio.sleep(pause)):
            answered = await _probe(client, probe_bound)
            if exited.is_set():
                break
            if answered is not None:
                return answered
            pause = CALL_PROBE_EVERY_SECONDS
        return "stopped", exit_words(exit_status())
    finally:
        await cancel_and_wait(gone)


async def _probe(client: Client, bound: float) -> Gone | None:
    """None when the server answered the tool-list request (even with an error); else what happened."""
    try:
        async with asyncio.timeout(bound):
            await client.list_tools(cache_mode="refresh")
    except MCPError as exc:
        return ("stopped", "") if exc.code == CONNECTION_CLOSED else None
    except TimeoutError:
        return "stopped answering", f" (nor did it answer klaw's check within {bound:g} seconds)"
    except Exception as exc:
        return "stopped answering", f" ({describe(exc)})"
    return None


async def _first(gone: asyncio.Future[Any], wait: Awaitable[object]) -> bool:
    """True when `gone` ended first; `wait` is cancelled either way."""
    other = asyncio.ensure_future(wait)
    try:
        await asyncio.wait({gone, other}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(other)
    return gone.done()
