"""klaw's cap on a command server's line calls the `mcp` SDK's private stdio helpers by name (no public API
bounds a line in the newest SDK, 2.3.0). Their names and shapes are checked (tools/mcp/sdk_stdio.py): the
first test fails, with the words klaw would log, the day an SDK upgrade changes one. An SDK that did makes
klaw read command servers with the SDK's own `stdio_client` (lines uncapped) and say so once, rather than
fail: before, a renamed helper failed klaw's import of its MCP client, so every start (decision 310)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from klaw.tools.mcp import transport
from klaw.tools.mcp.sdk_stdio import unfit
from tests.engine.harness import running_engine
from tests.tools.mcp_client.test_mcp_tools_in_turns import notes, tool_result

REPO = Path(__file__).resolve().parents[3]


def test_the_installed_sdk_has_the_private_helpers_the_line_cap_calls() -> None:
    unfit.cache_clear()
    assert unfit() is None, unfit()


def test_an_sdk_without_a_helper_still_lets_klaw_load_its_mcp_client_and_names_what_changed() -> None:
    program = (
        "import mcp.client.stdio as sdk\n"
        "del sdk._drain_stdout\n"  # as an SDK that renamed it
        "import klaw.tools.mcp.transport\n"
        "from klaw.tools.mcp.sdk_stdio import unfit\n"
        "print(unfit())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": f"{REPO}/src"}
    )
    assert ran.returncode == 0, ran.stderr  # before: ImportError: cannot import name '_drain_stdout'
    said = ran.stdout.strip()
    assert said.startswith("the installed mcp SDK 2.3.0 changed the private stdio helpers klaw's line cap uses"), said
    assert "(_drain_stdout is gone)" in said and "pip install 'mcp==2.3.*'" in said


async def test_with_such_an_sdk_command_servers_are_read_by_the_sdks_own_reader_and_it_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reason = "the installed mcp SDK 9.9 changed the private stdio helpers klaw's line cap uses (…)"
    monkeypatch.setattr(transport, "unfit", lambda: reason)
    transport._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="klaw.tools.mcp.transport"):
        async with running_engine(tmp_path, tools={"enabled": ["mcp:notes"]}, mcp=notes()) as h:
            for n in range(2):
                h.server.reply_tool_calls([("notes__add", {"a": 20, "b": n})])
                h.server.reply_text("done")
                assert (await h.turn("add")).text == "done"
                assert tool_result(h) == str(20 + n)
    warned = [r.getMessage() for r in caplog.records if r.name == "klaw.tools.mcp.transport"]
    assert warned == [reason]
    transport._warn_once.cache_clear()
