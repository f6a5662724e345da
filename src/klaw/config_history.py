"""What an engine.yaml an older `klaw init` wrote still pins: a value at a default klaw has changed since,
and a `tools.enabled` list written before klaw's newer groups existed (newcomer19, decision 476).

`klaw init` writes every default into the file, so an upgrade keeps the old ones: the file is the
person's, and klaw never rewrites it. `klaw config check` says so instead, one note each, with what the
default is now and how to follow it (delete the line); a value the person chose on purpose stays valid.
A default changed later gets its line in `OLD_DEFAULTS` (the templates' history, `git log -p --
src/klaw/templates/engine.yaml`); a new group goes at the end of `ToolGroup` (config/tools.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from klaw.config import ALL_TOOL_GROUPS, EngineConfig
from klaw.config_loader import LoadedConfig


@dataclass(frozen=True, slots=True)
class OldDefault:
    """`field` (dotted camelCase) was `value` by default, and `klaw init` wrote it, until `changed` (a date)."""

    field: str
    value: object
    changed: str


OLD_DEFAULTS: tuple[OldDefault, ...] = (
    OldDefault("rag.minSimilarity", 0.7, "2026-11-22"),
    OldDefault("summarizer.rollingEvery", 3, "2026-11-26"),
    OldDefault("database.vectorCacheMb", 256, "2026-11-26"),
)


def upgrade_notes(loaded: LoadedConfig) -> list[str]:
    """One line per value engine.yaml holds at an older klaw's default, and one for groups newer than its
    tools.enabled: what `klaw config check` prints (exit 0: the file is valid, and may mean it)."""
    file_name = loaded.path.name
    now, default = _values(loaded.config), _values(EngineConfig())
    notes = []
    for old in OLD_DEFAULTS:
        if loaded.sources.get(old.field) != file_name:
            continue
        value, current = _at(now, old.field), _at(default, old.field)
        if value == old.value and value != current:
            notes.append(
                f"note: {old.field} is {value} in {loaded.path}, klaw's default until {old.changed} (an older"
                f" `klaw init` wrote it there); the default is now {current}. If you did not choose {value},"
                " delete the line to follow klaw's default (its comment there may be out of date too)."
            )
    if loaded.sources.get("tools.enabled") == file_name and (newer := groups_newer_than(loaded.config.tools.enabled)):
        notes.append(
            f"note: tools.enabled in {loaded.path} names none of klaw's newer tool groups {', '.join(newer)} (an"
            " older `klaw init` wrote the groups of its day), so they are not offered. Add those you want to the"
            " list (`klaw tools` shows each with the line), or delete tools.enabled to offer every group."
        )
    return notes


def groups_newer_than(enabled: tuple[str, ...]) -> list[str]:
    """klaw's groups added after the newest one `enabled` names (ToolGroup lists them in the order klaw got
    them), none of them named: a list written before they existed rather than one that left them out."""
    named = [ALL_TOOL_GROUPS.index(group) for group in enabled if group in ALL_TOOL_GROUPS]
    if not named:
        return []  # [] offers no tools on purpose; plugins or MCP servers alone are a choice too
    return list(ALL_TOOL_GROUPS[max(named) + 1 :])


def _values(config: EngineConfig) -> dict[str, Any]:
    return config.model_dump(by_alias=True, mode="json")


def _at(values: Mapping[str, Any], field: str) -> object:
    for key in field.split("."):
        values = values[key]
    return values
