"""What `klaw init --force` refuses to change: the engine.yaml settings that say where a home's memory lives
and how it was indexed.

`--force` wrote the defaults over engine.yaml, so a home moved to PostgreSQL went back to the stale klaw.db
with only a "saved …bak" line, and a home on another tokenizer or embedder searched vectors and words made
another way (newcomer20, decision 489). The database (backend, its file or its variable) and the index's
makings (the full-text tokenizer, the embedder and what sets its vectors) are compared between the file and
what `--force` would write; any that differ are named and nothing is written. Everything else `--force`
still resets. An engine.yaml that does not load cannot be compared: its lines are read for a data choice the
defaults do not make (`backend: postgres`, another embedder, tokenizer or int8 runtime), which refuse the same
way; without one it is set aside as `engine.yaml.broken-<UTC time>` and the defaults written (decision 500).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from klaw.config import EngineConfig

# What `--language` chooses itself: given, these may change (then `klaw reindex`); the database may not.
INDEX_CHOICES = ("database.tokenizer", "embedder.")


def choices_lost(config_file: Path, written: str) -> list[tuple[str, str, str]]:
    """(engine.yaml name, the file's value, the value `written` would give) for each data choice that
    `written` would change; empty when the file is missing, does not load, or agrees."""
    import yaml

    from klaw.config_loader import ConfigError, config_from_mapping, load_config

    if not config_file.is_file():
        return []
    try:
        now = load_config(config_file, env={}).config
        then = config_from_mapping(yaml.safe_load(written) or {}, "the defaults")
    except (ConfigError, yaml.YAMLError):
        return []
    after = dict(_choices(then))
    return [(name, value, after.get(name, "unset")) for name, value in _choices(now) if after.get(name) != value]


def load_error(config_file: Path) -> str | None:
    """Why `config_file` does not load, on one line (the field and the rule, or the YAML slip); None when it loads
    or is not there."""
    from klaw.config_loader import ConfigError, load_config
    from klaw.text_preview import preview

    if not config_file.is_file():
        return None
    try:
        load_config(config_file, env={})
    except ConfigError as exc:
        return preview(" ".join(str(exc).split()), 400) or type(exc).__name__
    return None


# A line of engine.yaml setting a data choice the defaults do not make, read from the text: the file does not load.
_DATA_LINE = re.compile(r"^\s*(backend|tokenizer|runtime|urlEnv)\s*:\s*['\"]?([A-Za-z0-9_./-]+)")
_DATABASE_VALUES = {("backend", "postgres")}
_INDEX_VALUES = {("backend", "e5"), ("backend", "openai"), ("backend", "fake"), ("runtime", "onnx-int8")}


def broken_file_choices(config_file: Path, *, index_chosen: bool) -> list[str]:
    """In an engine.yaml that does not load, each line (numbered) choosing a database or an index the defaults do
    not make: the file cannot be compared (decision 489), but a reset over these lines would switch the data.
    `index_chosen`: `--language` chose the tokenizer and embedder, so only the database's lines count."""
    try:
        text = config_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _DATA_LINE.match(line.split("#", 1)[0])
        if match is None:
            continue
        key, value = match.groups()
        database = (key, value) in _DATABASE_VALUES or key == "urlEnv"
        index = (key, value) in _INDEX_VALUES or (key == "tokenizer" and value != "porter")
        if database or (index and not index_chosen):
            found.append(f"line {number}: {key}: {value}")
    return found


def broken_refusal(config_file: Path, error: str, lines: list[str]) -> str:
    """The words `klaw init --force` exits with on an engine.yaml that does not load and names other data."""
    return (
        f"{config_file} does not load ({error}), and it names another database or index than the defaults"
        f" ({'; '.join(lines)}): klaw init --force would switch this home's memory to the defaults' klaw.db and"
        f" embedder. Nothing was changed. Fix the file (klaw config check says what is wrong); to start over on"
        f" the defaults anyway, move it away first (mv {config_file} {config_file}.old; klaw init): the data it"
        " points at is left as it is."
    )


def _choices(config: EngineConfig) -> Iterator[tuple[str, str]]:
    database, embedder = config.database, config.embedder
    yield "database.backend", database.backend
    if database.backend == "sqlite":
        yield "database.path", database.path
    else:
        yield "database.urlEnv", str(database.url_env)
    yield "database.tokenizer", database.tokenizer
    yield "embedder.backend", embedder.backend
    if embedder.backend == "minilm":
        yield "embedder.runtime", "onnx-int8" if embedder.runtime == "onnx-int8" else "fp32"  # int8: other vectors
    if embedder.backend in ("openai", "fake"):
        yield "embedder.model", str(embedder.model)
        yield "embedder.dim", str(embedder.dim)


def refusal(config_file: Path, lost: list[tuple[str, str, str]]) -> str:
    """The words `klaw init --force` exits with when it would change `lost`."""
    named = "; ".join(f"{name}: {value} (the defaults: {default})" for name, value, default in lost)
    language = any(name in ("database.tokenizer", "embedder.backend") for name, _, _ in lost)
    return (
        f"klaw init --force would change where this home's memory lives or how it is searched: {config_file}"
        f" has {named}. Nothing was changed. To reset the rest and keep these, edit {config_file} by hand"
        + (" (or give the home's language again: klaw init --force --language CODE)" if language else "")
        + f"; to start over on the defaults anyway, move it away first (mv {config_file} {config_file}.old;"
        " klaw init): the data it points at is left as it is (docs/getting-started.md)."
    )
