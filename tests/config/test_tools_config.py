"""The `tools` section: which tool groups the model is offered; all by default. A name no group has is read, not
refused (decision 501: an uninstalled plugin's name stopped every command); the engine runs without it and
`klaw tools` / `klaw config check` name it failed (tests/tools/test_plugin_uninstalled.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from klaw.config import ALL_TOOL_GROUPS, EngineConfig, ToolsConfig
from klaw.config_loader import load_config
from klaw.tools.builtin.groups import BUILTIN_GROUPS


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "engine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_group_is_offered_by_default_and_each_has_a_provider() -> None:
    assert EngineConfig().tools.enabled == ALL_TOOL_GROUPS
    assert tuple(BUILTIN_GROUPS) == ALL_TOOL_GROUPS


def test_the_template_states_the_default(tmp_path: Path) -> None:
    template = write(tmp_path, (resources.files("klaw.templates") / "engine.yaml").read_text(encoding="utf-8"))
    assert load_config(template, env={}).config.tools == ToolsConfig()


def test_groups_from_the_file_and_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "tools:\n  enabled: [clock, files]\n")
    assert load_config(path, env={}).config.tools.enabled == ("clock", "files")
    loaded = load_config(path, env={"KLAW__TOOLS__ENABLED": "[memory]"})
    assert loaded.config.tools.enabled == ("memory",)
    assert loaded.sources["tools.enabled"] == "env KLAW__TOOLS__ENABLED"
    assert load_config(write(tmp_path, "tools:\n  enabled: []\n"), env={}).config.tools.enabled == ()


def test_an_unknown_group_is_read_not_refused(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, "tools:\n  enabled: [clock, calendar]\n"), env={})
    assert loaded.config.tools.enabled == ("clock", "calendar")
