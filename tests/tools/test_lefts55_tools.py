"""lefts55 (decision 510), items 1 and 2: an uninstalled plugin's failed row names the package to install again
and the command, from what klaw recorded when it last loaded the group; `klaw tools NAME` takes a tool's name
as well as a group's, whether its group is enabled or not. The plugin is a real dist-info on the path, removed
as `pip uninstall` removes it; every command through klaw's own entry point in process."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.tools.conftest import install
from tests.tools.test_plugin_uninstalled import WEATHER, _home


def test_an_uninstalled_plugins_row_names_its_package_and_the_command(tmp_path: Path, site: Path) -> None:
    install(site, "weather", "klaw_weather_gone", WEATHER, "TOOLS")
    home = _home(tmp_path, "clock, memory, weather")
    assert klaw_here(home, "config", "check").returncode == 0
    seen = home / "plugins_seen.json"
    assert json.loads(seen.read_text(encoding="utf-8"))["weather"]["package"] == "klaw_weather_gone"
    assert seen.stat().st_mode & 0o777 == 0o600
    shutil.rmtree(site / "klaw_weather_gone-0.1.dist-info")  # what `pip uninstall -y klaw_weather_gone` removes
    (site / "klaw_weather_gone.py").unlink()

    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 1, checked.stderr
    said = " ".join(checked.stderr.split())
    assert "klaw_weather_gone 0.1 offered it (klaw_weather_gone:TOOLS) when klaw last loaded it" in said, said
    assert f"install klaw_weather_gone again (`{sys.executable} -m pip install klaw_weather_gone`)" in said
    assert "or remove weather from tools.enabled" in said
    listed = klaw_here(home, "tools")
    assert listed.returncode == 1
    row = next(line for line in listed.stdout.splitlines() if line.startswith("weather "))
    assert row.startswith("weather [plugin klaw_weather_gone (not installed)]: failed"), row
    assert "-m pip install klaw_weather_gone" in row, row


def test_a_never_seen_group_keeps_the_general_words(tmp_path: Path) -> None:
    """A name klaw never loaded (a slip, or a plugin removed before any start) has no package to name."""
    home = _home(tmp_path, "clock, wether")
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 1
    assert "install the package that provides wether" in checked.stderr
    assert not (home / "plugins_seen.json").exists()


def test_klaw_tools_takes_a_tools_name_or_a_groups(tmp_path: Path, site: Path) -> None:
    install(site, "weather", "klaw_weather_named", WEATHER, "TOOLS")
    home = _home(tmp_path, "clock, memory")
    (home / "engine.yaml").write_text(
        (home / "engine.yaml").read_text(encoding="utf-8").replace("approval: [", "approval: [forecast, ", 1),
        encoding="utf-8",
    )
    forecast = klaw_here(home, "tools", "forecast")  # weather installed, not enabled
    assert forecast.returncode == 0, forecast.stderr
    lines = forecast.stdout.splitlines()
    assert lines[0].startswith("forecast [plugin klaw_weather_named (weather = klaw_weather_named:TOOLS)]: not offered")
    assert "a tool of the group weather, which tools.enabled does not name; fix: add weather to" in lines[0]
    assert "The weather to come in a city." in lines
    assert any(line.strip().startswith("city (string, required)") for line in lines), lines
    assert "Approval: each call waits for your /approve (tools.approval holds it)." in lines

    file_read = klaw_here(home, "tools", "file_read")  # klaw's files, not enabled
    assert file_read.returncode == 0, file_read.stderr
    assert "a tool of the group files, which tools.enabled does not name" in file_read.stdout
    assert "Group: files (built-in files)" in file_read.stdout

    text = (home / "engine.yaml").read_text(encoding="utf-8")
    (home / "engine.yaml").write_text(text.replace("enabled: [clock, memory]", "enabled: [clock, memory, weather]"))
    group = klaw_here(home, "tools", "weather")  # an enabled group: its tools, each whole
    assert group.returncode == 0, group.stderr
    lines = group.stdout.splitlines()
    assert lines[0].startswith(
        "weather is a tool group (plugin klaw_weather_named (weather = klaw_weather_named:TOOLS));"
    )
    assert any(line.startswith("forecast [plugin klaw_weather_named") and ": offered" in line for line in lines)
    assert "Group: weather (plugin klaw_weather_named (weather = klaw_weather_named:TOOLS))" in lines
    as_json = json.loads(klaw_here(home, "tools", "weather", "--json").stdout)
    assert as_json["group"] == "weather" and [row["name"] for row in as_json["rows"]] == ["forecast"]
    clock = klaw_here(home, "tools", "current_time")
    assert "Group: clock (built-in clock)" in clock.stdout
    assert "Approval: none; a call runs without asking (tools.approval does not hold it)." in clock.stdout
    missing = klaw_here(home, "tools", "forcast")
    assert missing.returncode == 1
    assert "no tool or tool group 'forcast'" in missing.stderr and "did you mean forecast" in missing.stderr
