"""The `mcp` SDK's private stdio helpers klaw's bounded reader calls (stdio_lines.py), checked in one place.

The SDK (2.3.0, the newest) offers no public way to bound a command server's line: `stdio_client` takes the
server and an error log only, and its reader is a closure. stdio_lines.py is therefore `stdio_client` with
its reader replaced, calling the SDK's own process start and shutdown by their private names
(decision 298). Those may change in any release: `_get_executable_command` was a plain function in 2.0 and
is a coroutine in 2.3. So each name is looked up here and its shape checked (`unfit`): an SDK that renamed
or reshaped one makes klaw fall back to the SDK's own `stdio_client`, whose lines are not capped, with one
warning naming the fix, rather than failing every command server at start (decision 310);
tests/tools/mcp_client/test_mcp_sdk_stdio_helpers.py fails with the same words.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import mcp.client.stdio as sdk

# name: (a coroutine function?, the parameters klaw passes, by name)
USED: dict[str, tuple[bool, tuple[str, ...]]] = {
    "_get_executable_command": (True, ("command",)),
    "_create_platform_compatible_process": (True, ("command", "args", "env", "errlog", "cwd")),
    "_drain_stdout": (True, ("process",)),
    "_stop_server_process": (True, ("process",)),
    "_aclose_all": (True, ("streams",)),
}


def _misfit(name: str, coroutine: bool, parameters: tuple[str, ...]) -> str | None:
    helper: Callable[..., Any] | None = getattr(sdk, name, None)
    if helper is None:
        return f"{name} is gone"
    if inspect.iscoroutinefunction(helper) != coroutine:
        return f"{name} is {'no longer' if coroutine else 'now'} a coroutine function"
    missing = [p for p in parameters if p not in inspect.signature(helper).parameters]
    return f"{name} has no parameter {', '.join(missing)}" if missing else None


@functools.cache
def unfit() -> str | None:
    """Why the installed SDK's helpers do not fit klaw's bounded reader, or None when they all do."""
    found = [why for name, (coroutine, parameters) in USED.items() if (why := _misfit(name, coroutine, parameters))]
    if not found:
        return None
    return (
        f"the installed mcp SDK {version('mcp')} changed the private stdio helpers klaw's line cap uses"
        f" ({'; '.join(found)}): command MCP servers are read by the SDK's own stdio_client, their lines not"
        " capped at 16 MB. Install mcp 2.3 (pip install 'mcp==2.3.*') or a klaw made for this SDK"
        " (docs/decisions/310-the-mcp-sdks-private-stdio-helpers.md)"
    )
