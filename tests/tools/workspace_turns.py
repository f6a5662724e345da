"""The workspace bound tests' shared steps (tests/tools/test_workspace_quota.py, test_workspace_file_quota.py,
test_workspace_hidden_folders.py): an engine in this process with the fake model, the real sandbox where a test
runs code, and one turn in which the model calls a tool and then answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.engine.harness import Harness, running_engine
from tests.tools.sandbox_helpers import backend_or_skip, no_sandbox_reason

MIB = 1024 * 1024
needs_sandbox = pytest.mark.skipif(no_sandbox_reason() is not None, reason=f"no sandbox here: {no_sandbox_reason()}")


@asynccontextmanager
async def sandboxed_engine(where: Path, **tools: Any) -> AsyncIterator[Harness]:
    """`running_engine` with these `tools` settings, skipped saying why when its sandbox cannot run here."""
    async with running_engine(where, tools=tools) as h:
        backend_or_skip(h.home)
        yield h


async def tool_turn(h: Harness, ask: str, calls: list[tuple[str, dict[str, Any]]], reply: str) -> str:
    """The person says `ask`; the model calls `calls`, then answers `reply` (checked to arrive). Returns what
    the model read last: the last call's result."""
    h.server.reply_tool_calls(calls)
    h.server.reply_text(reply)
    assert (await h.turn(ask)).text == reply
    content = h.last_request_messages()[-1]["content"]
    assert isinstance(content, str)
    return content


async def code_turn(h: Harness, ask: str, language: str, code: str, reply: str) -> str:
    """`tool_turn` with one `code_execute` call."""
    return await tool_turn(h, ask, [("code_execute", {"language": language, "code": code})], reply)
