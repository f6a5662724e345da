"""host_exec: only what hostExec.allow names runs, as an argument vector: shell operators are refused,
quoted text stays literal, nothing is expanded; a `shell:` pattern is the one way to a shell. Commands
run in the workspace with a minimal environment and within their time and output limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from klaw.channels.telegram_trouble import take_timedelta_periods
from klaw.config import HostExecConfig
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolResult
from klaw.tools.host.tool import register_host_exec
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext
from tests.engine.harness import CHAT, running_engine


async def run(tmp_path: Path, command: str, **config: Any) -> ToolResult:
    registry = ToolRegistry()
    register_host_exec(registry, HostExecConfig.model_validate(config))
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    context = ToolContext(ChatRef("console", "me"), workspace)
    return await registry.execute(ToolCall("c1", "host_exec", json.dumps({"command": command})), context)


async def test_an_allowed_command_runs_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "note.txt").write_text("hi", encoding="utf-8")
    result = await run(tmp_path, "ls -1", allow=["ls -1", "echo *"])
    assert not result.is_error and result.content.startswith("exit code 0")
    assert "note.txt" in result.content


async def test_a_command_not_in_the_allow_list_is_refused_naming_what_is_allowed(tmp_path: Path) -> None:
    result = await run(tmp_path, "rm -rf note.txt", allow=["ls -1", "git status"])
    assert result.is_error
    assert "not in hostExec.allow; allowed: ls -1; git status" in result.content


@pytest.mark.parametrize(
    "command",
    [
        "echo hi; touch pwned",
        "echo hi && touch pwned",
        "echo hi || touch pwned",
        "echo hi | tee pwned",
        "echo hi > pwned",
        "echo $(touch pwned)",
        "echo hi & touch pwned",
        "echo <(touch pwned)",
    ],
)
async def test_shell_operators_are_refused_and_nothing_runs(tmp_path: Path, command: str) -> None:
    result = await run(tmp_path, command, allow=["echo *", "touch *", "tee *"])
    assert result.is_error and "without a shell" in result.content
    assert not (tmp_path / "workspace" / "pwned").exists()


@pytest.mark.parametrize("command", ["echo '$(touch pwned); rm -rf x'", "echo `touch pwned`", "echo $HOME"])
async def test_quoted_operators_and_expansions_stay_literal_arguments(tmp_path: Path, command: str) -> None:
    result = await run(tmp_path, command, allow=["echo *"])
    assert result.content.startswith("exit code 0")
    assert not (tmp_path / "workspace" / "pwned").exists()
    printed = result.content.split("stdout:\n", 1)[1]
    assert "$" in printed or "`" in printed  # echoed as written, never expanded


async def test_a_shell_pattern_is_the_one_way_to_a_shell(tmp_path: Path) -> None:
    allow = ["shell: echo * | tr a-z A-Z"]
    shouted = await run(tmp_path, "echo quiet | tr a-z A-Z", allow=allow)
    assert "QUIET" in shouted.content
    other = await run(tmp_path, "echo quiet | sh", allow=allow)
    assert other.is_error


async def test_the_command_gets_no_secret_from_klaws_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    result = await run(tmp_path, "env", allow=["env"])
    assert "PATH=" in result.content and "sk-very-secret" not in result.content


async def test_the_telegram_channels_ptb_opt_in_does_not_reach_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acts2: the Telegram channel sets PTB_TIMEDELTA=true in klaw's environment (decision 388); a command
    klaw runs gets the minimal environment, so it never sees the variable meant for python-telegram-bot."""
    monkeypatch.delenv("PTB_TIMEDELTA", raising=False)  # restored after the test, as the channel leaves it
    take_timedelta_periods()
    result = await run(tmp_path, "env", allow=["env"])
    assert "PATH=" in result.content and "PTB_TIMEDELTA" not in result.content


async def test_time_and_output_limits_stop_a_command(tmp_path: Path) -> None:
    slow = await run(tmp_path, "sleep 30", allow=["sleep *"], timeoutSeconds=1)
    assert slow.content.startswith("stopped: the wall time of 1 s ran out")
    loud = await run(tmp_path, "yes", allow=["yes"], maxOutputKb=64)
    assert loud.content.startswith("stopped: the output passed 64 KiB") and "bytes cut" in loud.content


async def test_an_unknown_program_is_a_clear_error(tmp_path: Path) -> None:
    result = await run(tmp_path, "no-such-program-klaw", allow=["no-such-program-klaw"])
    assert result.is_error and "no program 'no-such-program-klaw' on the PATH" in result.content


async def test_through_a_turn_only_with_an_allow_list(tmp_path: Path) -> None:
    async with running_engine(tmp_path / "off") as h:
        await h.turn("hello")
        names = [tool["function"]["name"] for tool in h.server.chat_requests[0].body["tools"]]
        assert "host_exec" not in names
        status = await h.engine.commands.handle(CHAT, "status", "")
        assert "Not offered: host_exec: hostExec.allow in engine.yaml lists no command patterns" in status
    # approval: [] — the person chose to let the allowed commands run unasked (held by default, below)
    async with running_engine(tmp_path / "on", hostExec={"allow": ["echo *"]}, tools={"approval": []}) as h:
        h.server.reply_tool_calls([("host_exec", {"command": "echo from the host"}), ("host_exec", {"command": "id"})])
        h.server.reply_text("done")
        await h.turn("say something")
        first, second = h.last_request_messages()[-2:]
        assert first["content"].startswith("exit code 0") and "from the host" in first["content"]
        assert "not in hostExec.allow" in second["content"]


async def test_by_default_an_allowed_command_is_asked_about_before_it_runs(tmp_path: Path) -> None:
    async with running_engine(tmp_path, hostExec={"allow": ["touch *"]}) as h:  # tools.approval left as it is
        made = h.home.workspace / "made-by-host"
        h.server.reply_tool_calls([("host_exec", {"command": "touch made-by-host"})])
        h.server.reply_text("not made")
        question = await h.turn("make the file")
        assert question.approval is not None
        assert question.text.startswith("The agent wants to run host_exec:\n```\ncommand: touch made-by-host\n```")
        assert not made.exists()  # held until the person answers
        assert (await h.engine.commands.handle(CHAT, "deny", question.approval)) == "Denied: host_exec will not run."
        await h.wait_for_replies(2)
        assert h.delivered[-1].text == "not made" and not made.exists()
        assert h.last_request_messages()[-1]["content"].startswith("Not run: the person denied host_exec.")


async def test_schedule_add_offers_allow_tools_only_once_a_held_tool_is_offered(tmp_path: Path) -> None:
    def schedule_add_arguments(h: Any) -> set[str]:
        tools = {tool["function"]["name"]: tool["function"] for tool in h.server.chat_requests[-1].body["tools"]}
        return set(tools["schedule_add"]["parameters"]["properties"])

    async with running_engine(tmp_path / "off") as h:  # host_exec held by default, but not offered
        await h.turn("hello")
        assert "allow_tools" not in schedule_add_arguments(h)
    async with running_engine(tmp_path / "on", hostExec={"allow": ["git status"]}) as h:
        await h.turn("hello")
        assert "allow_tools" in schedule_add_arguments(h)
