"""Where a person (or a model) finds the arguments a tool takes (newcomer18, decision 464).

`!memory_core_update {"key": "city", "value": "Porto"}` answered only "key: Extra inputs are not permitted",
and neither `klaw tools` nor `klaw tools --json` showed any parameter: the person guessed. Now an argument
the tool does not take (or one it needs, missing) names the arguments it takes, `klaw tools --json` carries
each tool's schema, and `klaw tools NAME` shows one tool with its arguments.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml
from typer.testing import CliRunner

from klaw import FunctionModel, Klaw
from klaw.cli.app import app
from klaw.llm.function_model import AgentInfo, call_tool, tool_calls
from klaw.llm.messages import ChatMessage, ChatResponse

SETTINGS = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(yaml.safe_dump(SETTINGS), encoding="utf-8")
    return home


async def test_a_wrong_argument_names_the_arguments_the_tool_takes(tmp_path: Path) -> None:
    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if info.turn_round == 1:
            return tool_calls(call_tool("memory_core_update", {"key": "city", "value": "Porto"}))
        return str(messages[-1].content)  # the tool's answer, said back

    async with Klaw(_home(tmp_path), model=FunctionModel(model)) as agent:
        said = await agent.ask("alice", "remember I live in Porto")
    assert "- key: Extra inputs are not permitted" in said, said
    assert "- the arguments this tool takes: set (object), remove (list of string)" in said, said


def test_klaw_tools_shows_a_tools_arguments_and_its_json_carries_them(tmp_path: Path) -> None:
    env = {"KLAW_HOME": str(_home(tmp_path)), "COLUMNS": "200"}
    one = CliRunner().invoke(app, ["tools", "memory_core_update"], env=env)
    assert one.exit_code == 0, one.output
    lines = one.output.splitlines()
    assert "memory_core_update [built-in memory]: offered" in lines, one.output
    assert lines[lines.index("Arguments (a JSON object):") :] == [
        "Arguments (a JSON object):",
        '  set (object): e.g. {"city": "Porto"}',
        "  remove (list of string): Keys",
    ], one.output

    listed = CliRunner().invoke(app, ["tools", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.output)["rows"]}
    assert set(rows["memory_core_update"]["parameters"]["properties"]) == {"set", "remove"}
    assert rows["file_write"]["parameters"]["required"] == ["path", "content"]

    unknown = CliRunner().invoke(app, ["tools", "memory_core_updat"], env=env)
    assert unknown.exit_code == 1
    assert (
        "no tool or tool group 'memory_core_updat'" in unknown.output
        and "did you mean memory_core_update" in unknown.output
    )


def test_klaw_tools_names_an_mcp_servers_tool_only_a_running_engine_lists(tmp_path: Path) -> None:
    """`klaw tools weather__forecast` with no engine said "no tool …: `klaw tools` lists them", sending the
    person to a listing that cannot hold it: an MCP server's tools are known only once an engine started it
    (decision 473). Its row in the listing says so already."""
    home = _home(tmp_path)
    server = {"command": sys.executable, "args": [str(tmp_path / "weather.py")]}
    settings = {**SETTINGS, "tools": {"enabled": ["clock", "mcp:weather"]}, "mcp": {"servers": {"weather": server}}}
    (home / "engine.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    env = {"KLAW_HOME": str(home), "COLUMNS": "200"}
    one = CliRunner().invoke(app, ["tools", "weather__forecast"], env=env)
    assert one.exit_code == 1
    assert (
        "no tool 'weather__forecast' for console:" in one.output
        and "here: it would be MCP server weather's, and MCP servers' tools are listed while the engine runs"
        " (none is running here): start it (klaw serve, or klaw engine) and run `klaw tools` again"
        in one.output
    ), one.output
    other = CliRunner().invoke(app, ["tools", "forecast"], env=env)
    assert other.exit_code == 1 and "it may be a tool of MCP server weather, and" in other.output, other.output
