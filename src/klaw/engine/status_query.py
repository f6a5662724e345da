"""The socket's `status` query: a running engine's state as `klaw status` prints it, the lines of /status that
are the engine's (uptime, queue depth, LLM slots, embedding queue, scheduled tasks, the parts that failed: MCP
servers, tool groups, prompt files), its pid and start. Asked of no chat: /status's model and segment lines
would create the chat's session (decision 510)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from klaw.engine.commands import CommandHandler


async def status_answer(commands: CommandHandler, _params: Mapping[str, Any]) -> dict[str, Any]:
    """`{"pid", "started_at", "lines"}`: the engine's process, when it started (ISO 8601) and its /status lines."""
    return {
        "pid": os.getpid(),
        "started_at": commands.started_at.isoformat(timespec="seconds"),
        "lines": await commands.engine_status(),
    }
