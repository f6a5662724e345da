"""An uninstalled plugin's row says to install it again from where it came (newcomer24 item 7, decision 540):
after `pip install -e ./klaw-mytools` then `pip uninstall`, it said `… -m pip install klaw-mytools`, which asks
PyPI for a package that is only in a folder. The dist-info carries PEP 610's direct_url.json as pip writes it; it
is removed as `pip uninstall` removes it; every command in process."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.tools.conftest import install
from tests.tools.test_plugin_uninstalled import WEATHER, _home


def _from_folder(site: Path, source: Path, *, editable: bool) -> None:
    info = site / "klaw_weather_local-0.1.dist-info"
    direct = {"url": source.as_uri(), "dir_info": {"editable": True} if editable else {}}
    (info / "direct_url.json").write_text(json.dumps(direct), encoding="utf-8")


def test_a_plugin_installed_from_a_folder_is_installed_again_from_that_folder(tmp_path: Path, site: Path) -> None:
    source = tmp_path / "my projects" / "klaw-weather"  # a space: the command quotes it
    source.mkdir(parents=True)
    install(site, "weather", "klaw_weather_local", WEATHER, "TOOLS")
    _from_folder(site, source, editable=True)
    home = _home(tmp_path, "clock, memory, weather")
    assert klaw_here(home, "config", "check").returncode == 0
    shutil.rmtree(site / "klaw_weather_local-0.1.dist-info")
    (site / "klaw_weather_local.py").unlink()

    listed = klaw_here(home, "tools", env={"COLUMNS": "400"})
    row = " ".join(next(line for line in listed.stdout.splitlines() if line.startswith("weather ")).split())
    assert f"(`{sys.executable} -m pip install -e '{source}'`)" in row, row  # before: pip install klaw_weather_local

    install(site, "weather", "klaw_weather_local", WEATHER, "TOOLS")  # again, not editable this time
    _from_folder(site, source, editable=False)
    assert klaw_here(home, "config", "check").returncode == 0
    shutil.rmtree(site / "klaw_weather_local-0.1.dist-info")
    checked = klaw_here(home, "config", "check")
    assert f"(`{sys.executable} -m pip install '{source}'`)" in " ".join(checked.stderr.split()), checked.stderr
