"""What a developer writing a tool plugin hit first (newcomer17; decision 455): a plugin that prints at
import broke `klaw tools --json` and `klaw mcp serve`'s stdio protocol (stdout is theirs); an entry point
naming a tool itself (`TOOLS = weather`) was called as a provider (the tool run with a ToolSetup, "coroutine
'weather' was never awaited", "its provider raised TypeError"); and a provider passed as `Klaw(tools=
[provide])` was told "tool 'provide' needs a description"; a plugin whose import hangs hung the start for ever,
silently (adversary26; decision 466). Plugins arrive by entry points (a real dist-info)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
import threading
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw import FunctionModel, InvalidArgument, Klaw
from klaw.cli.app import app
from tests.test_library import CONFIG
from tests.tools.conftest import install
from tests.tools.test_plugins import NOTES

LOUD = '''
print("loud plugin: loading")


def provide(setup):
    print("loud plugin: providing")

    async def shout(text: str) -> str:
        """Say it loudly.

        Args:
            text: what to say
        """
        return text.upper()

    return [shout]
'''

MISTAKES = '''
from pathlib import Path

CALLED = Path(__file__).with_name("called")


async def weather(city: str) -> str:
    """The weather in a city now.

    Args:
        city: the city's name
    """
    CALLED.write_text("weather")
    return f"sunny in {city}"


def forecast(city: str, days: int = 3) -> str:
    """The weather in a city for the next days.

    Args:
        city: the city's name
        days: how many days ahead
    """
    CALLED.write_text("forecast")
    return f"{days} days of rain in {city}"


TOOLS = weather
FORECAST = forecast
'''

HOME_CONFIG = "embedder: {backend: fake, dim: 32}\nsummarizer: {enabled: false}\ntools: {enabled: [clock, loud]}\n"


def test_what_a_plugin_prints_as_it_loads_stays_out_of_klaw_tools_json(tmp_path: Path, site: Path) -> None:
    install(site, "loud", "klaw_loud_plugin_json", LOUD, "provide")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(HOME_CONFIG, encoding="utf-8")
    result = CliRunner().invoke(app, ["tools", "--json"], env={"KLAW_HOME": str(home), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)  # before: "loud plugin: loading" first, no JSON
    assert "shout" in json.dumps(listing)
    assert "loud plugin: loading" in result.stderr and "loud plugin: providing" in result.stderr


async def test_what_a_plugin_prints_as_it_loads_stays_out_of_klaw_mcp_serve_s_protocol(
    tmp_path: Path, site: Path
) -> None:
    install(site, "loud", "klaw_loud_plugin_mcp", LOUD, "provide")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(HOME_CONFIG, encoding="utf-8")
    async with Klaw(home, model=FunctionModel(lambda _m, _i: "ok")) as agent:  # a chat to share the memory of
        await agent.ask("console:alice", "hello")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "klaw", "mcp", "serve", "--chat", "console:alice"),
        env={**os.environ, "KLAW_HOME": str(home), "PYTHONPATH": path},
        stdin=-1,
        stdout=-1,
        stderr=-1,
    )
    assert process.stdin is not None and process.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
    process.stdin.write(b"\n")
    await process.stdin.drain()
    first = await asyncio.wait_for(process.stdout.readline(), timeout=60)
    process.stdin.close()
    _, err = await asyncio.wait_for(process.communicate(), timeout=60)
    answer = json.loads(first)  # before: b"loud plugin: loading\n", and the client's protocol broke
    assert answer["id"] == 1 and "serverInfo" in answer["result"], first
    assert b"loud plugin: loading" in err


async def test_an_entry_point_naming_a_tool_itself_says_to_write_a_list_and_runs_nothing(
    tmp_path: Path, site: Path
) -> None:
    install(site, "weather", "klaw_weather_mistake", MISTAKES, "TOOLS")
    (site / "klaw_weather_mistake-0.1.dist-info" / "entry_points.txt").write_text(
        "[klaw.tools]\nweather = klaw_weather_mistake:TOOLS\nforecasting = klaw_weather_mistake:FORECAST\n"
        "notes = klaw_weather_mistake_notes:provide\n",
        encoding="utf-8",
    )
    (site / "klaw_weather_mistake_notes.py").write_text(NOTES, encoding="utf-8")
    config = {**CONFIG, "tools": {"enabled": ["clock", "weather", "forecasting", "notes"]}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda _m, _i: "ok")) as agent:
            rows = {row.name: row for row in await agent.tools("alice")}
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]  # never awaited: never called
    assert not (site / "called").exists()
    weather, forecasting = rows["weather"], rows["forecasting"]
    assert weather.state == forecasting.state == "failed"
    assert weather.reason == (
        "klaw_weather_mistake:TOOLS is the tool weather itself, where a list of tools (or a provider taking a"
        " ToolSetup) is expected"
    )
    assert weather.fix == "write TOOLS = [weather] in klaw_weather_mistake, or remove weather from tools.enabled"
    assert "klaw_weather_mistake:FORECAST is the tool forecast itself" in forecasting.reason
    assert forecasting.fix.startswith("write FORECAST = [forecast] in")
    # the docs' provider, enabled by tools.enabled in config= as the refusal below says, is offered
    assert rows["note_write"].state == "offered"


def test_a_provider_passed_as_a_tool_is_told_how_providers_are_loaded(tmp_path: Path) -> None:
    scope: dict[str, object] = {}
    exec(compile(NOTES, "notes", "exec"), scope)
    with pytest.raises(InvalidArgument) as refused:
        Klaw(tmp_path / "home", config=CONFIG, tools=[scope["provide"]])  # type: ignore[list-item]
    assert str(refused.value) == (
        "tools= takes tools; provide(setup: ToolSetup) is a tool group's provider, which the engine calls itself"
        " when it loads the group from an installed package's `klaw.tools` entry point: install the package and"
        " add the group's name to tools.enabled in config= (docs/library.md, 'Tools from an installed package'),"
        " or pass the tool functions themselves here"
    )


HANGS = """
import pathlib, time
while not pathlib.Path(__file__).with_name("release").exists():  # the test releases it once it is done
    time.sleep(0.05)


def provide(setup):
    return []
"""


async def test_a_plugin_whose_import_hangs_is_named_and_left_out_and_the_start_goes_on(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("klaw.tools.plugin_import.SAY_AFTER_SECONDS", 0.2)  # 5 s and 60 s as shipped
    monkeypatch.setattr("klaw.tools.plugin_import.LIMIT_SECONDS", 0.5)
    install(site, "hang", "klaw_hanging_import", HANGS, "provide")
    config = {**CONFIG, "tools": {"enabled": ["clock", "hang"]}}
    safety_net = threading.Timer(10, (site / "release").touch)  # the old code waited for it: released, it fails
    safety_net.start()
    try:
        with caplog.at_level(logging.WARNING, "klaw"):
            async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda _m, _i: "ok")) as agent:
                rows = {row.name: row for row in await agent.tools("alice")}
                assert await agent.ask("alice", "hi") == "ok"
    finally:
        safety_net.cancel()
        (site / "release").touch()
    assert rows["current_time"].state == "offered"  # the other groups load, turns run
    assert rows["hang"].state == "failed"
    assert (
        rows["hang"].reason
        == "importing klaw_hanging_import:provide: its import had not finished after 0.5 s (it hangs?)"
    )
    assert rows["hang"].fix.startswith("remove hang from tools.enabled (or uninstall klaw_hanging_import)")
    assert (
        "still importing klaw_hanging_import:provide (tool group 'hang'): klaw waits for it up to 0.5 s in all; if"
        " its import hangs, remove hang from tools.enabled to start without it"
    ) in caplog.text


GENERATOR = '''
def gen(city: str):
    """The weather, a line at a time.

    Args:
        city: the city's name
    """
    yield f"sunny in {city}"


async def calm() -> str:
    """Say something calm."""
    return "calm"


TOOLS = [calm, gen]


def provide(setup):
    return [gen]
'''


async def test_a_plugins_tool_that_yields_is_named_with_its_module_and_what_to_write(
    tmp_path: Path, site: Path
) -> None:
    """newcomer21 (decision 501): a plain list holding a generator said "its provider raised ToolDefinitionError:
    tool 'gen' yields …; fix: update or reinstall klaw-bad": a list has no provider, and no reinstall mends `gen`."""
    install(site, "bad", "klaw_bad_gen", GENERATOR, "TOOLS")
    (site / "klaw_bad_gen-0.1.dist-info" / "entry_points.txt").write_text(
        "[klaw.tools]\nbad = klaw_bad_gen:TOOLS\nbadly = klaw_bad_gen:provide\n", encoding="utf-8"
    )
    config = {**CONFIG, "tools": {"enabled": ["clock", "bad", "badly"]}}
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda _m, _i: "ok")) as agent:
        rows = {row.name: row for row in await agent.tools("alice")}
        assert await agent.ask("alice", "hello") == "ok"  # the turn goes on without the group
    for group in ("bad", "badly"):
        row = rows[group]
        assert row.state == "failed", row
        assert row.reason.startswith("tool gen in klaw_bad_gen cannot be offered: tool 'gen' yields its results"), row
        assert "provider" not in row.reason and "reinstall" not in row.fix
        assert row.fix == (
            "tool gen in klaw_bad_gen: write `return` instead of `yield` (klaw_bad_gen's author does that: update it"
            f" once they have), or remove {group} from tools.enabled"
        )
    assert "calm" not in rows  # all or nothing: the group's good tool is left out with it
