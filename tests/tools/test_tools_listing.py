"""What the agent has, as a person asks: `klaw tools` (a real subprocess, with and without an engine
running on the home), `/tools` over the engine's socket, and `Klaw.tools` in a program. A real plugin
installed through the `klaw.tools` entry point group, one that raises on load, one whose provider
raises, a tool held by `tools.approval`, a model with fewer groups and an MCP server that cannot start:
each is a row naming its source, and a broken one says why and what to do, never a traceback."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

from klaw import FunctionModel, Klaw, ToolRow
from klaw.engine.frames import CommandFrame, HelloFrame, OutboundFrame
from tests.engine import GatewayClient, short_socket_dir
from tests.tools.conftest import install
from tests.tools.test_plugins import PLUGIN

SHOUT = "klaw_list_shout"
BROKEN = "klaw_list_broken"
FLAKY = "klaw_list_flaky"
SHOUT_SOURCE = f"plugin {SHOUT} (shouting = {SHOUT}:TOOLS)"
FLAKY_SOURCE = 'def provide(setup):\n    raise RuntimeError("no token in NOTES_TOKEN")\n'
MODELS = {
    "fake/large": {"baseUrl": "http://127.0.0.1:9/v1"},
    "fake/small": {"baseUrl": "http://127.0.0.1:9/v1", "tools": ["clock"]},
}
CONFIG: dict[str, Any] = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "models": MODELS,
    "routing": {"default": "fake/large"},
    "tools": {
        "enabled": ["clock", "shouting", "broken", "host", "mcp:files"],
        "approval": ["shout", "host_exec", "shuot", "files__rm"],
    },
    "mcp": {"servers": {"files": {"command": "/nonexistent/mcp-files"}}, "startWaitSeconds": 5},
}


def install_plugins(site: Path) -> None:
    install(site, "shouting", SHOUT, PLUGIN, "TOOLS")
    install(site, "broken", BROKEN, "raise ImportError('missing dependency')\n", "TOOLS")


def by_name(rows: list[ToolRow]) -> dict[str, ToolRow]:
    return {row.name: row for row in rows}


async def klaw_tools(home: Path, site: Path, *args: str) -> tuple[int, str, str]:
    """`klaw tools` as a person runs it, the plugins' folder on its path; the event loop keeps serving."""
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))  # a worktree's src kept
    env = {**os.environ, "KLAW_HOME": str(home), "PYTHONPATH": path, "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", "tools", *args, env=env, stdout=-1, stderr=-1
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def test_a_running_engine_lists_plugins_failures_and_approval_to_a_program_a_chat_and_klaw_tools(
    site: Path,
) -> None:
    install_plugins(site)
    with short_socket_dir() as root:
        home = root / "home"
        async with Klaw(home, config=CONFIG, model=FunctionModel(lambda _m, _i: "ok"), listen=True) as agent:
            rows = by_name(await agent.tools("alice"))
            assert rows["current_time"] == ToolRow("current_time", "built-in clock", "offered")
            shout = rows["shout"]
            assert (shout.state, shout.needs_approval) == ("offered", True)
            assert shout.source == SHOUT_SOURCE
            broken = rows["broken"]
            assert broken.state == "failed" and broken.source == f"plugin {BROKEN} (broken = {BROKEN}:TOOLS)"
            assert broken.reason == f"loading {BROKEN}:TOOLS raised ImportError: missing dependency"
            assert "remove broken from tools.enabled" in broken.fix
            host = rows["host_exec"]
            assert (host.state, host.needs_approval) == ("unavailable", True)
            assert "hostExec.allow" in host.reason and "hostExec.allow" in host.fix
            typo = rows["shuot"]  # held by name, but no tool is called so: the one meant would run unasked
            assert (typo.state, typo.source, typo.needs_approval) == ("not offered", "tools.approval", True)
            assert "misspelt" in typo.reason
            assert "files__rm" not in rows  # its server has not listed its tools: unknown, not wrong
            files = rows["mcp:files"]  # engine.yaml's mistake: failed, not retried, no log to read (newcomer12)
            assert files.state == "failed" and files.source == "MCP server files"
            missing = "there is no program '/nonexistent/mcp-files' (mcp.servers.files.command in engine.yaml)"
            assert files.reason == f"it cannot start: {missing}", files.reason
            assert files.fix == "correct mcp.servers.files in engine.yaml, then restart klaw" and "log" not in files.fix

            status = await agent.ask("alice", "/status")
            assert f"Not loaded: broken: loading {BROKEN}:TOOLS raised ImportError: missing dependency" in status

            # Another model, fewer groups (decision 121): the plugin's tool is there, not for this model.
            await agent.ask("alice", "/model fake/small")
            shout = by_name(await agent.tools("alice"))["shout"]
            assert shout.state == "not offered"
            assert shout.reason == "models.fake/small.tools for model fake/small does not name shouting"

            # /tools over the socket, as the web page and Telegram send it: the same rows, one a line.
            client = await GatewayClient.connect(agent.home.socket_path)
            try:
                await client.send(HelloFrame(channels=["web"]))
                await client.send(CommandFrame(id="c1", channel="web", chat_id="main", command="tools", args=""))
                reply = next(f for f in await client.roundtrip() if isinstance(f, OutboundFrame))
            finally:
                await client.aclose()
            assert isinstance(reply, OutboundFrame) and reply.kind == "notice"
            lines = reply.text.splitlines()
            assert lines[0] == "Tools for web:main (model fake/large):"
            assert f"- shout [{SHOUT_SOURCE}]: offered (each call waits for your /approve)" in lines
            assert any(line.startswith(f"- broken [plugin {BROKEN}") and "ImportError" in line for line in lines)

            # `klaw tools` asks this engine over its socket rather than starting a second one.
            code, out, err = await klaw_tools(home, site, "--json", "--chat", "library:alice")
            assert code == 1, err  # a group failed to load
            shown = json.loads(out)
            assert (shown["origin"], shown["model"], shown["chat"]) == ("engine", "fake/small", "library:alice")
            listed = by_name([ToolRow.from_json(row) for row in shown["rows"]])
            assert listed["shout"].state == "not offered" and listed["broken"].state == "failed"
            assert "Traceback" not in err
            # The program gave the engine its own config; engine.yaml (klaw init's) names other groups.
            assert shown["changed"].startswith("engine.yaml's tools.enabled (clock, files, memory")
            assert "is not what the running engine uses (clock)" in shown["changed"]
            assert "restart it to apply the file" in shown["changed"]


async def test_without_an_engine_klaw_tools_builds_the_list_itself_and_prints_plain_rows(
    tmp_path: Path,
    site: Path,
) -> None:
    install_plugins(site)
    install(site, "flaky", FLAKY, FLAKY_SOURCE, "provide")
    home = tmp_path / "home"
    home.mkdir()
    enabled = [*CONFIG["tools"]["enabled"], "flaky", "skills", "mcp:remote", "mcp:found"]
    servers = {
        **CONFIG["mcp"]["servers"],
        "remote": {"url": "https://mcp.example.com/mcp"},
        "found": {"command": sys.executable},
    }
    yaml = json.dumps(
        {**CONFIG, "tools": {**CONFIG["tools"], "enabled": enabled}, "mcp": {**CONFIG["mcp"], "servers": servers}}
    )
    (home / "engine.yaml").write_text(yaml, encoding="utf-8")  # JSON is YAML
    for name, text in (("greet", "---\nname: greet\ndescription: Greet people.\n---\nSay hi.\n"), ("odd", "hi\n")):
        (home / "workspace" / "skills" / name).mkdir(parents=True)
        (home / "workspace" / "skills" / name / "SKILL.md").write_text(text, encoding="utf-8")
    code, out, err = await klaw_tools(home, site)
    assert code == 1 and "Traceback" not in err, err
    lines = out.splitlines()
    assert lines[0].startswith(f"Tools for console:{getpass.getuser()} (model fake/large), as an engine started now")
    assert "would offer them (none is running; no MCP server is started or connected to here):" in lines[0]
    assert "current_time [built-in clock]: offered" in lines
    assert f"shout [{SHOUT_SOURCE}]: offered (each call waits for your /approve)" in lines
    assert (
        f"broken [plugin {BROKEN} (broken = {BROKEN}:TOOLS)]: failed: loading {BROKEN}:TOOLS raised ImportError:"
        f" missing dependency; fix: install what {BROKEN} needs (or reinstall it), or remove broken from tools.enabled"
    ) in lines
    assert (
        f"flaky [plugin {FLAKY} (flaky = {FLAKY}:provide)]: failed: its provider raised RuntimeError: no token in"
        f" NOTES_TOKEN; fix: update or reinstall {FLAKY}, or remove flaky from tools.enabled"
    ) in lines
    see = "fix: run klaw tools while an engine runs (klaw serve, klaw engine) to see its tools"
    assert (  # a healthy server no engine has started: "not started", not "unavailable" (newcomer19, decision 476)
        "mcp:found [MCP server found]: not started: no engine runs to start it: an engine starts its command when it"
        f" runs, and its tools are listed then; {see}"
    ) in lines, lines
    assert (  # a program that is not there: failed here too, as the engine would say (newcomer12)
        "mcp:files [MCP server files]: failed: it cannot start: there is no program '/nonexistent/mcp-files'"
        " (mcp.servers.files.command in engine.yaml); fix: correct mcp.servers.files in engine.yaml, then restart klaw"
    ) in lines, lines
    assert (
        "mcp:remote [MCP server remote]: not started: no engine runs to connect to it: an engine connects to its URL"
        f" when it runs, and lists its tools then; {see}"
    ) in lines, lines
    assert "greet [skill (workspace/skills, read with skill_read)]: offered" in lines
    odd = next(line for line in lines if line.startswith("odd [skill"))
    assert "front matter" in odd and "klaw skills check" in odd
    assert not (home / "klaw.db").exists()  # listed without opening the home's memory


async def test_klaw_tools_says_when_klaw_s_default_groups_are_in_force_and_how_to_choose(
    tmp_path: Path, site: Path
) -> None:
    """A home with no engine.yaml (or one without tools.enabled) listed every built-in group as if the
    person had chosen them; now a line says the defaults are in force and where to choose others."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    code, out, err = await klaw_tools(home, site)
    assert code == 0 and "current_time [built-in clock]: offered" in out, err
    assert f"No tool groups are chosen for this home (there is no engine.yaml in {home})" in err
    assert "so klaw's defaults are in force: clock, files, memory, scheduler," in err
    assert "To choose others, list them in engine.yaml's tools.enabled (e.g. tools: {enabled: [clock" in err
    (home / "engine.yaml").write_text("embedder: {backend: fake, dim: 32}\n", encoding="utf-8")
    code, out, err = await klaw_tools(home, site, "--json")
    assert code == 0 and "engine.yaml sets no tools.enabled" in json.loads(out)["defaults"], err
    (home / "engine.yaml").write_text("embedder: {backend: fake, dim: 32}\ntools: {enabled: [clock]}\n")
    code, out, err = await klaw_tools(home, site)
    assert code == 0 and "defaults" not in err and "current_time [built-in clock]: offered" in out, err
    assert "defaults" not in json.loads((await klaw_tools(home, site, "--json"))[1])
