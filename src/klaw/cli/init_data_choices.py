"""What `klaw init --force` refuses to change: the engine.yaml settings that say where a home's memory lives
and how it was indexed.

`--force` wrote the defaults over engine.yaml, so a home moved to PostgreSQL went back to the stale klaw.db
with only a "saved …bak" line, and a home on another tokenizer or embedder searched vectors and words made
another way (newcomer20, decision 489). The database (backend, its file or its variable) and the index's
makings (the full-text tokenizer, the embedder and what sets its vectors) are compared between the file and
what `--force` would write; any that differ are named and nothing is written. Everything else `--force`
still resets. An engine.yaml that does not load is not compared (what it points at is unknown).
"""

from __future__ import annotations

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
