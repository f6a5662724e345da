"""The effective configuration as rows (field, value, source) for `klaw config show` and the web page.

Values come from the validated config, sources from the loader's provenance (default, engine.yaml
or a `KLAW__…` variable), unless a chat command stored an override in klaw.db's settings (`/rag set`,
`/summarizer off`, `/embeddings off`): then the command's value and `command (…)`. klaw keeps secrets
out of engine.yaml (only the *names* of environment variables, `…Env`), but a row is masked anyway if
its field looks like a secret or its value is a URL with a password in it: the settings page must never
become the place a key leaks from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from klaw.config_loader import LoadedConfig
from klaw.redaction import MASK, mask_url_credentials

__all__ = ["MASK", "ConfigRow", "config_rows", "masked", "shown"]
FILE_SOURCE = "engine.yaml"
_SECRET_FIELD = re.compile(r"(?i)(api_?key|token|secret|password|passwd)$")


@dataclass(frozen=True)
class ConfigRow:
    field: str
    value: Any
    source: str


@dataclass(frozen=True)
class ConfigOverride:
    """A value a chat command stored (`/rag set`, `/summarizer off`…), in force over engine.yaml."""

    value: Any
    command: str


def config_rows(
    loaded: LoadedConfig, *, mask: bool = True, overrides: Mapping[str, ConfigOverride] | None = None
) -> list[ConfigRow]:
    """Every field with its effective value and source; a field a command overrides shows the command's
    value and `command (/rag set)` as its source."""
    effective = loaded.config.model_dump(mode="json", by_alias=True)
    defaults = dict(flatten(type(loaded.config)().model_dump(mode="json", by_alias=True)))
    # A model without its own contextBudget has context.defaultBudgetTokens': shown as such, not `null` beside
    # the 8000 /models says (newcomer23, decision 527).
    budgets = {f"models.{model_id}.contextBudget": model_id for model_id in loaded.config.models}
    rows = []
    for key, value in flatten(effective):
        override = (overrides or {}).get(key)
        if override is not None:
            rows.append(ConfigRow(key, override.value, f"command ({override.command})"))
            continue
        if value is None and key in budgets:
            budget = loaded.config.context_budget(budgets[key])
            rows.append(ConfigRow(key, budget, "default (context.defaultBudgetTokens)"))
            continue
        source = source_of(key, loaded.sources)
        if source == FILE_SOURCE and key in defaults and defaults[key] == value:
            # `klaw init` writes every default into engine.yaml: say which of its lines change nothing
            source = f"{FILE_SOURCE} (= default)"
        rows.append(ConfigRow(key, masked(key, value) if mask else value, source))
    return rows


def flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        here = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flatten(value, here + ".")
        else:
            yield here, value


def source_of(key: str, sources: Mapping[str, str]) -> str:
    """The source of `key`, or of the nearest configured ancestor (a whole section or model entry)."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found:
            return found
    return "default"


def masked(key: str, value: Any) -> Any:
    """`value` with anything secret-looking replaced by a mask (field names ending in Env are names)."""
    name = key.rsplit(".", 1)[-1]
    if value not in (None, "") and _SECRET_FIELD.search(name) and not name.endswith("Env"):
        return MASK
    if isinstance(value, str):
        return mask_url_credentials(value)
    return value


def shown(field: str, value: Any) -> str:
    """A row's value as one line for a person, in `klaw config show` and the web page's settings: JSON,
    except `commands` (what /help and Telegram's command menu list), a list of {name, description}
    objects that filled 11 lines of JSON in the table: its names, as typed in a chat, and where the
    descriptions are."""
    if field == "commands" and isinstance(value, list):
        names = [f"/{item['name']}" for item in value if isinstance(item, Mapping) and "name" in item]
        if len(names) == len(value):
            return f"{' '.join(names)} (/help describes each)"
    return json.dumps(value)
