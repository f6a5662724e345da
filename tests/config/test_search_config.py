"""The `search` section: hybrid search's ranking knobs, their validated defaults and the template."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from klaw.config import EngineConfig, SearchConfig
from klaw.config_loader import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "engine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_the_measured_ones() -> None:
    search = EngineConfig().search
    assert (search.vector_weight, search.neighbour_weight, search.neighbour_span) == (0.4, 0.4, 2)


def test_the_template_states_the_defaults(tmp_path: Path) -> None:
    template = write(tmp_path, (resources.files("klaw.templates") / "engine.yaml").read_text(encoding="utf-8"))
    assert load_config(template, env={}).config.search == SearchConfig()


def test_section_and_env_overrides_are_parsed(tmp_path: Path) -> None:
    path = write(tmp_path, "search:\n  vectorWeight: 0.7\n  neighbourSpan: 1\n")
    loaded = load_config(path, env={"KLAW__SEARCH__NEIGHBOURWEIGHT": "0"})
    assert loaded.config.search == SearchConfig(vector_weight=0.7, neighbour_weight=0.0, neighbour_span=1)
    assert loaded.sources["search.neighbourWeight"] == "env KLAW__SEARCH__NEIGHBOURWEIGHT"


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("search:\n  vectorWeight: 1.5\n", "search.vectorWeight"),
        ("search:\n  vectorWeight: -0.1\n", "search.vectorWeight"),
        ("search:\n  neighbourWeight: 2\n", "search.neighbourWeight"),
        ("search:\n  neighbourSpan: 9\n", "search.neighbourSpan"),
        ("search:\n  neighbourSpan: -1\n", "search.neighbourSpan"),
    ],
)
def test_out_of_range_values_are_rejected_naming_the_field(tmp_path: Path, yaml_text: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(write(tmp_path, yaml_text), env={})
