"""Installed plugins that load nowhere, and two that clash, are rows of `klaw tools` and `Klaw.tools`
saying what to do. Before: a package's group named as a built-in one (`clock = "pkg:SHADOW"`) was
silently ignored, a plugin installed but not in `tools.enabled` was not listed at all, and a group
whose tool had another group's tool name was "failed …; fix: update or reinstall <pkg>", which no
update mends. Real packages installed through the `klaw.tools` entry point group (dist-info), listed by
a program's engine and by the `klaw tools` command without an engine."""

from __future__ import annotations

import json
from pathlib import Path

from klaw import FunctionModel, Klaw, ToolRow
from tests.tools.conftest import install
from tests.tools.test_plugins import PLUGIN
from tests.tools.test_tools_listing import klaw_tools

WEATHER = "klaw_rows_weather"
SHADOW = "klaw_rows_shadow"
LOUD = "klaw_rows_loud"
TIMELY = "klaw_rows_timely"
SHADOW_SOURCE = '''
async def current_time() -> str:
    """The time, as this package tells it."""
    return "noon"


TOOLS = [current_time]
'''
CONFIG = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "tools": {"enabled": ["clock", "shouting", "loud", "timely", "websearch"]},
}
# Before: reason "no search provider: set web.search in engine.yaml (docs/web.md)", fix "" (host_exec's had its fix)
NO_SEARCH = ToolRow(
    "web_search",
    "built-in websearch",
    "unavailable",
    reason="no search provider",
    fix="set web.search in engine.yaml (docs/web.md)",
)


def install_packages(site: Path) -> None:
    install(site, "weather", WEATHER, PLUGIN.replace("shout", "weather"), "TOOLS")  # installed, not enabled
    install(site, "clock", SHADOW, SHADOW_SOURCE, "TOOLS")  # a built-in group's name
    install(site, "shouting", "klaw_rows_shout", PLUGIN, "TOOLS")
    install(site, "loud", LOUD, PLUGIN, "TOOLS")  # a tool named shout too
    install(site, "timely", TIMELY, SHADOW_SOURCE, "TOOLS")  # a tool named as the built-in clock's


EXPECTED = {
    "weather": ToolRow(
        "weather",
        f"plugin {WEATHER} (weather = {WEATHER}:TOOLS)",
        "not offered",
        reason="installed, not enabled",
        fix="add weather to tools.enabled",
    ),
    "clock": ToolRow(
        "clock",
        f"plugin {SHADOW} (clock = {SHADOW}:TOOLS)",
        "not offered",
        reason="its name is klaw's built-in group clock's, which is loaded instead: this one never is",
        fix=f"{SHADOW} must offer it under a name of its own (ask its author), or uninstall {SHADOW}",
    ),
    "loud": ToolRow(
        "loud",
        f"plugin {LOUD} (loud = {LOUD}:TOOLS)",
        "failed",
        reason="its tool 'shout' has the name of a tool of shouting"
        " (plugin klaw_rows_shout (shouting = klaw_rows_shout:TOOLS))",
        fix=f"two groups cannot offer one tool name: the author of {LOUD} or the author of klaw_rows_shout can"
        " rename its tool 'shout'; you can remove loud or shouting from tools.enabled",
    ),
    # Before: only "remove timely or clock from tools.enabled", though the plugin's author can rename the tool
    "timely": ToolRow(
        "timely",
        f"plugin {TIMELY} (timely = {TIMELY}:TOOLS)",
        "failed",
        reason="its tool 'current_time' has the name of a tool of clock (built-in clock)",
        fix=f"two groups cannot offer one tool name: the author of {TIMELY} can rename its tool 'current_time';"
        " you can remove timely or clock from tools.enabled",
    ),
}


async def test_a_program_sees_plugins_not_enabled_shadowed_or_clashing(tmp_path: Path, site: Path) -> None:
    install_packages(site)
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(lambda _m, _i: "ok")) as agent:
        rows = await agent.tools("alice")
    named = {row.name: row for row in rows if row.name in EXPECTED and row.source.startswith("plugin")}
    assert named == EXPECTED
    offered = [row.name for row in rows if row.state == "offered"]
    assert offered == ["current_time", "shout"]  # klaw's clock, the first shouting group
    assert [row for row in rows if row.name == "web_search"] == [NO_SEARCH]


async def test_klaw_tools_without_an_engine_prints_the_same_rows(tmp_path: Path, site: Path) -> None:
    install_packages(site)
    home = tmp_path / "home"
    home.mkdir()
    (home / "engine.yaml").write_text(json.dumps(CONFIG), encoding="utf-8")
    code, out, err = await klaw_tools(home, site)
    assert code == 1 and "Traceback" not in err, err  # 1: a group failed (loud)
    lines = out.splitlines()
    assert (
        f"weather [plugin {WEATHER} (weather = {WEATHER}:TOOLS)]: not offered: installed, not enabled;"
        " fix: add weather to tools.enabled"
    ) in lines
    assert any(
        line.startswith(f"clock [plugin {SHADOW} (clock = {SHADOW}:TOOLS)]: not offered: its name") for line in lines
    )
    assert any(line.startswith("loud [") and "remove loud or shouting from tools.enabled" in line for line in lines)
    assert any(line.startswith("timely [") and f"the author of {TIMELY} can rename" in line for line in lines)
    no_search = "web_search [built-in websearch]: unavailable: no search provider; fix: set web.search in engine.yaml"
    assert f"{no_search} (docs/web.md)" in lines
