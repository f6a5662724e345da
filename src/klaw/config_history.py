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


# How many of ToolGroup's first groups each older `klaw init` wrote into tools.enabled (the template's history:
# 5 on 2026-11-22, then 6, 7, 9 and 11 on 2026-11-25; 12 since). A list the docs suggest, such as getting-started's
# [clock, files, memory], is a person's choice, not a file of an older day: no note for it (newcomer21, 502).
INIT_WROTE: tuple[int, ...] = (5, 6, 7, 9, 11)


def groups_newer_than(enabled: tuple[str, ...]) -> list[str]:
    """klaw's groups added after those `enabled` names, when it names exactly what an older `klaw init` wrote
    (ToolGroup lists the groups in the order klaw got them): a list written before they existed, not one that
    left them out on purpose."""
    for count in INIT_WROTE:
        if set(enabled) == set(ALL_TOOL_GROUPS[:count]):
            return list(ALL_TOOL_GROUPS[count:])
    return []  # [] offers no tools on purpose; a shorter or mixed list is a choice too


def _values(config: EngineConfig) -> dict[str, Any]:
    return config.model_dump(by_alias=True, mode="json")


def _at(values: Mapping[str, Any], field: str) -> object:
    for key in field.split("."):
        values = values[key]
    return values
