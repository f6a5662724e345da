"""A plugin uninstalled (or lost with a rebuilt environment) after `tools.enabled` named it stopped everything
(newcomer21 item 1): every command read the file as invalid ("unknown tool group 'weather'", exit 2), `klaw
memory list` too, and `klaw serve` under systemd would have restarted in a loop. The engine runs without it now,
as without a plugin whose import fails, and the checks name it failed (decision 501). The plugin is a real
dist-info on the path, removed as `pip uninstall` removes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from klaw import FunctionModel, Klaw
from klaw.config_loader import load_config
from klaw.engine.clock import ManualClock
from tests.cli.klaw_here import klaw_here
from tests.tools.conftest import install
from tests.tools.test_plugins import PLUGIN

GROUPS = "enabled: [clock, files, memory, scheduler, subagents, messaging, skills, web, websearch, code, host, docs]"


def _home(tmp_path: Path, groups: str) -> Path:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    text = (home / "engine.yaml").read_text(encoding="utf-8")
    assert GROUPS in text
    text = text.replace("backend: minilm", "backend: fake", 1).replace(GROUPS, f"enabled: [{groups}]", 1)
    (home / "engine.yaml").write_text(text, encoding="utf-8")
    return home


async def test_an_uninstalled_plugin_is_a_failed_group_not_an_invalid_file(tmp_path: Path, site: Path) -> None:
    install(site, "weather", "klaw_weather_gone", PLUGIN, "TOOLS")
    home = _home(tmp_path, "clock, memory, weather")
    assert klaw_here(home, "config", "check").returncode == 0
    async with Klaw(home, model=FunctionModel(lambda messages, info: "fine"), clock=ManualClock()) as agent:
        assert await agent.ask("console:me", "hello") == "fine"
    shutil.rmtree(site / "klaw_weather_gone-0.1.dist-info")  # what `pip uninstall -y klaw-weather-gone` removes
    (site / "klaw_weather_gone.py").unlink()

    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 1, checked.stderr  # as for a plugin whose import fails: valid, but…
    assert "is valid, but tool group 'weather' fails to load: no installed package offers it" in checked.stderr
    assert "is no longer installed" in checked.stderr and "remove weather from tools.enabled" in checked.stderr
    assert "unknown tool group" not in checked.stderr
    listed = klaw_here(home, "memory", "list", "--chat", "console:me")  # needs no tools at all
    assert listed.returncode == 0 and "hello" in listed.stdout, listed.stderr
    async with Klaw(home, model=FunctionModel(lambda messages, info: "still here"), clock=ManualClock()) as agent:
        assert await agent.ask("console:me", "and now?") == "still here"
        rows = {row.name: row for row in await agent.tools("console:me")}
    assert rows["weather"].state == "failed", rows["weather"]
    assert "no longer installed" in rows["weather"].reason
    assert rows["current_time"].state == "offered"


def test_a_slip_for_a_groups_name_is_named_with_the_group_meant(tmp_path: Path) -> None:
    """Not refused when the file is read any more (an uninstalled plugin's name looks the same): the failed row
    says which group was likely meant, and `klaw config check` exits 1 with it."""
    home = _home(tmp_path, "clock, memroy")
    assert load_config(home / "engine.yaml", env={}).config.tools.enabled == ("clock", "memroy")
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 1, checked.stderr
    assert "tool group 'memroy' fails to load" in checked.stderr
    assert "if you meant memory, write that" in checked.stderr


WEATHER = '''
async def forecast(city: str, days: int = 3) -> str:
    """The weather to come in a city.

    Args:
        city: the city's name
        days: how many days ahead
    """
    return f"sunny in {city} for {days} days"


TOOLS = [forecast]


def provide(setup):
    return [forecast]
'''


def test_klaw_tools_names_an_installed_groups_tools_before_it_is_enabled(tmp_path: Path, site: Path) -> None:
    """newcomer21 (decision 501): `klaw tools weather` said "Its arguments cannot be shown" and never named
    `forecast`: the person named the group, so its list is imported (bounded) and shown; a provider, which
    builds its tools from the engine, is said to need enabling first."""
    install(site, "weather", "klaw_weather_preview", WEATHER, "TOOLS")
    (site / "klaw_weather_preview-0.1.dist-info" / "entry_points.txt").write_text(
        "[klaw.tools]\nweather = klaw_weather_preview:TOOLS\nforecasting = klaw_weather_preview:provide\n",
        encoding="utf-8",
    )
    home = _home(tmp_path, "clock, memory")
    shown = klaw_here(home, "tools", "weather")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "installed, not enabled" in lines[0], lines
    assert "Its tools once weather is in tools.enabled:" in lines
    assert "forecast: The weather to come in a city." in lines
    assert any(line.strip().startswith("city (string, required): the city's name") for line in lines), lines
    assert any(line.strip().startswith("days (integer") and "3" in line for line in lines), lines
    assert "cannot be shown" not in shown.stdout
    provider = klaw_here(home, "tools", "forecasting")
    assert "Its tools cannot be shown: klaw_weather_preview:provide is a provider" in provider.stdout, provider.stdout
    assert "add forecasting to tools.enabled, then `klaw tools forecasting` lists them" in provider.stdout
