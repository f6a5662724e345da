"""The environment variables a configuration names (`…Env` fields, an MCP server's `env`), with the field
naming each: what a process started elsewhere (a systemd service) must be given for this configuration to
work. A section switched off (`enabled: false`) names nothing, since nothing reads it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True)
class NamedVariable:
    """One variable and the field that names it (dotted, as engine.yaml spells it)."""

    name: str
    field: str


def named_variables(config: BaseModel) -> list[NamedVariable]:
    """Every variable the configuration names, in field order, each once (its first field)."""
    seen: dict[str, NamedVariable] = {}
    for variable in _walk(config, ""):
        seen.setdefault(variable.name, variable)
    return list(seen.values())


def _walk(section: BaseModel, prefix: str) -> Iterator[NamedVariable]:
    if getattr(section, "enabled", True) is False:
        return
    for name, info in type(section).model_fields.items():
        value = getattr(section, name)
        path = f"{prefix}{info.alias or name}"
        if isinstance(value, BaseModel):
            yield from _walk(value, f"{path}.")
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel):
                    yield from _walk(item, f"{path}.{key}.")
                elif _names_variables(name) and isinstance(item, str):
                    yield NamedVariable(item, f"{path}.{key}")
        elif _names_variables(name) and isinstance(value, str):
            yield NamedVariable(value, path)
        elif _names_variables(name) and isinstance(value, tuple):
            yield from (NamedVariable(item, path) for item in value if isinstance(item, str))


def _names_variables(field: str) -> bool:
    """`…_env` fields hold variable names; so does an MCP server's `env` (names passed through)."""
    return field == "env" or field.endswith("_env")
