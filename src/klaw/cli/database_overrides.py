"""A `KLAW__DATABASE__…` variable that keeps klaw on another database than engine.yaml names.

`klaw db migrate --to postgres` switches engine.yaml to PostgreSQL, but an environment variable outranks
the file: `KLAW__DATABASE__BACKEND=sqlite` exported in this shell, or set in `KLAW_HOME/service.env` for the
service, kept klaw on klaw.db after the move without a word (lefts53, decision 486). The move and
`klaw config check` now name each such variable, where it is set, what it makes klaw use and how to drop it.
Only the backend and the variable naming the server are compared; no value of a secret is ever printed
(`urlEnv` is a variable's name, validated as one).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from klaw.cli.service_env import SERVICE_ENV

_FIELDS = (("backend", "backend"), ("urlEnv", "url_env"))


def database_overrides(config_file: Path, root: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """One warning per `KLAW__` variable, in this shell's environment or in service.env, that sets
    database.backend or database.urlEnv to something other than engine.yaml's (its default if unset)."""
    from klaw.config_loader import ConfigError, load_config

    env = os.environ if env is None else env
    try:
        own = load_config(config_file, env={}).config.database
    except ConfigError:
        return []  # engine.yaml itself is refused: the caller says so
    warnings = []
    service_file = root / SERVICE_ENV
    for where, variables in (("shell", env), ("service", _klaw_variables(service_file))):
        try:
            loaded = load_config(config_file, env=variables)
        except ConfigError:
            continue  # an override klaw refuses: the start says so, in its own words
        for alias, name in _FIELDS:
            source = loaded.sources.get(f"database.{alias}", "")
            theirs, ours = getattr(loaded.config.database, name), getattr(own, name)
            if source.startswith("env ") and theirs != ours:
                variable = source.removeprefix("env ")
                warnings.append(_words(where, variable, alias, theirs, ours, service_file))
    return warnings


def _words(where: str, variable: str, alias: str, theirs: object, ours: object, service_file: Path) -> str:
    setting = f"sets database.{alias} to {theirs}, over engine.yaml's {ours}"
    if where == "shell":
        return (
            f"warning: {variable}, exported in this shell, {setting}: klaw engine, serve, chat and every command"
            f" started from this shell use {theirs}. To run on what engine.yaml says: unset {variable}"
        )
    return (
        f"warning: {variable}, set in {service_file}, {setting}: the service (klaw service install) uses {theirs}."
        f" To run it on what engine.yaml says: remove that line, then systemctl --user restart klaw.service"
    )


def _klaw_variables(path: Path) -> dict[str, str]:
    """The `KLAW__…` variables a service.env sets, with their values (systemd's EnvironmentFile syntax: one
    NAME=value a line, the value maybe in quotes)."""
    from klaw.config_loader import ENV_PREFIX

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    found = {}
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        if line.startswith(("#", ";")) or "=" not in line:
            continue
        name, value = (part.strip() for part in line.split("=", 1))
        if name.startswith(ENV_PREFIX):
            found[name] = _unquoted(value)
    return found


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        return inner.replace('\\"', '"').replace("\\\\", "\\") if value[0] == '"' else inner
    return value
