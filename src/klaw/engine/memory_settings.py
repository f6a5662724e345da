"""The memory settings in force: `engine.yaml` overridden by what `/summarizer`, `/embeddings` and
`/rag` stored in the database's `settings` table (docs/decisions/006-runtime-memory-settings.md).

Loaded once at start and kept in memory (retrieval reads them on every turn); a command writes the
table first and the memory copy after, so what is shown is what survives a restart. A stored value
that no longer validates (edited by hand, or from an older klaw) is ignored with a warning.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from klaw.config import EmbedderConfig, RagConfig, SummarizerConfig
from klaw.errors import KlawError
from klaw.store.protocol import SettingsRepository

log = logging.getLogger(__name__)

SUMMARIZER_ENABLED = "summarizer_enabled"
EMBEDDINGS_ENABLED = "embedding_pipeline_enabled"
RAG_ENABLED = "rag_enabled"
# `/rag set` keys (docs/decisions/006-runtime-memory-settings.md) → RagConfig fields.
RAG_KEYS = {
    "rag_conversation_limit": "conversation_limit",
    "rag_exchange_limit_per_conversation": "exchange_limit_per_conversation",
    "rag_min_similarity": "min_similarity",
    "rag_max_tokens": "max_tokens",
}
# What a person is shown: engine.yaml's names (`klaw config show` shows those), never the stored keys (527).
FILE_NAMES = tuple(to_camel(field) for field in RAG_KEYS.values())
_FLAGS = (SUMMARIZER_ENABLED, EMBEDDINGS_ENABLED, RAG_ENABLED)
# Each stored setting → the engine.yaml field it overrides (as `config_view` names fields) and the command that sets it.
OVERRIDDEN_FIELDS = {
    SUMMARIZER_ENABLED: ("summarizer.enabled", "/summarizer"),
    EMBEDDINGS_ENABLED: ("embedder.pipelineEnabled", "/embeddings"),
    RAG_ENABLED: ("rag.enabled", "/rag"),
    **{key: (f"rag.{to_camel(field)}", "/rag set") for key, field in RAG_KEYS.items()},
}


# Every name a person may type for a key: the key, its field, and engine.yaml's name for it (`minSimilarity`,
# `rag.minSimilarity`), since `klaw config show` and engine.yaml show those.
_KEY_NAMES = {
    name: key for key, field in RAG_KEYS.items() for name in (key, field, to_camel(field), f"rag.{to_camel(field)}")
}


class SettingError(KlawError, ValueError):
    """A `/rag set` that cannot be applied; the message says why, for the person who typed it."""


# What the person calls each value in a refusal ("Limit must be greater than 0").
_NOUNS = {
    "conversation_limit": "Limit",
    "exchange_limit_per_conversation": "Limit",
    "min_similarity": "Similarity",
    "max_tokens": "Token budget",
}
_OUT_OF_RANGE = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def parse_rag_value(key: str, raw: str) -> tuple[str, int | float]:
    """Validate `/rag set <key> <value>` (docs/decisions/006-runtime-memory-settings.md) by `RagConfig`
    itself, so a value engine.yaml would refuse is refused here too, with the same bounds; the
    refusal is put in the person's words. Returns (canonical key, value)."""
    canonical = _KEY_NAMES.get(key)
    if canonical is None:
        raise SettingError(f"Invalid key {key!r}. Valid keys: {', '.join(FILE_NAMES)} (engine.yaml's rag names)")
    name = RAG_KEYS[canonical]
    try:
        checked = RagConfig.model_validate({name: raw})
    except ValidationError as exc:
        low, high = _bounds(name)
        if exc.errors()[0]["type"] in _OUT_OF_RANGE:
            within = f"between {low:g} and {high:g}" if high is not None else f"greater than {low:g}"
            raise SettingError(f"{_NOUNS[name]} must be {within}") from None
        kind = "a whole number" if RagConfig.model_fields[name].annotation in (int, "int") else "a number"
        if high is not None:
            kind += f" from {low:g} to {high:g}"
        raise SettingError(f"Invalid value for {to_camel(name)}: {raw!r} is not {kind}") from None
    value: int | float = getattr(checked, name)
    return canonical, value


def _bounds(name: str) -> tuple[float, float | None]:
    """The field's lower bound and upper bound (None: unbounded) as `RagConfig` declares them."""
    low, high = 0.0, None
    for rule in RagConfig.model_fields[name].metadata:
        low = float(getattr(rule, "gt", getattr(rule, "ge", low)))
        bound = getattr(rule, "le", getattr(rule, "lt", None))
        high = float(bound) if bound is not None else high
    return low, high


class MemorySettings:
    def __init__(
        self, summarizer: SummarizerConfig, embedder: EmbedderConfig, rag: RagConfig, settings: SettingsRepository
    ) -> None:
        """The engine.yaml sections the commands override: `summarizer`, `embedder`, `rag`."""
        self._summarizer = summarizer
        self._embedder = embedder
        self._defaults = rag
        self._settings = settings
        self._stored: dict[str, Any] = {}
        self._rag = rag

    async def load(self) -> MemorySettings:
        for key in (*_FLAGS, *RAG_KEYS):
            value = await self._settings.get(key)
            if value is None:
                continue
            if key in _FLAGS and not isinstance(value, bool):
                log.warning("setting %s holds a %s, not true/false; engine.yaml applies", key, type(value).__name__)
                continue
            self._stored[key] = value
        self._rag = self._merged_rag()
        return self

    @property
    def rag(self) -> RagConfig:
        return self._rag

    @property
    def summarizer_enabled(self) -> bool:
        return bool(self._stored.get(SUMMARIZER_ENABLED, self._summarizer.enabled))

    @property
    def embeddings_enabled(self) -> bool:
        return bool(self._stored.get(EMBEDDINGS_ENABLED, self._embedder.pipeline_enabled))

    def overridden(self, key: str) -> bool:
        """Whether `key` comes from a command rather than engine.yaml."""
        return key in self._stored and (key not in RAG_KEYS or self._valid(key))

    def overrides(self) -> list[tuple[str, Any, str]]:
        """(engine.yaml field, value in force, command that set it) for each setting a command overrides,
        so a settings view can show the effective value and why it differs from the file."""
        return [
            (field, self._stored[key], command)
            for key, (field, command) in OVERRIDDEN_FIELDS.items()
            if self.overridden(key)
        ]

    async def set_flag(self, key: str, on: bool) -> None:
        if key not in _FLAGS:
            raise ValueError(f"unknown switch {key!r}")
        await self._settings.set(key, on)
        self._stored[key] = on
        self._rag = self._merged_rag()

    async def reset_rag(self, key: str | None) -> list[str]:
        """`/rag reset [key]`: forget what `/rag set` (and `/rag on|off`) stored for `key`, or for every
        `/rag` value, so the configuration's applies again; returns the keys that were set. Raises
        `SettingError` for a key `/rag` does not know (decision 290)."""
        if key is None:
            keys = [RAG_ENABLED, *RAG_KEYS]
        else:
            canonical = RAG_ENABLED if key in (RAG_ENABLED, "enabled", "rag.enabled") else _KEY_NAMES.get(key)
            if canonical is None:
                raise SettingError(
                    f"Invalid key {key!r}. Valid keys: enabled, {', '.join(FILE_NAMES)} (engine.yaml's rag names)"
                )
            keys = [canonical]
        reset = [name for name in keys if name in self._stored]
        for name in reset:
            await self._settings.delete(name)
            del self._stored[name]
        self._rag = self._merged_rag()
        return reset

    async def set_rag(self, key: str, raw: str) -> tuple[str, int | float]:
        """`/rag set`: validate, store, apply; raises `SettingError` with the reason."""
        canonical, value = parse_rag_value(key, raw)
        await self._settings.set(canonical, value)
        self._stored[canonical] = value
        self._rag = self._merged_rag()
        return canonical, value

    def _merged_rag(self) -> RagConfig:
        rag = self._defaults
        if RAG_ENABLED in self._stored:
            rag = rag.model_copy(update={"enabled": self._stored[RAG_ENABLED]})
        for key, field in RAG_KEYS.items():
            if key in self._stored and self._valid(key):
                rag = RagConfig.model_validate({**rag.model_dump(), field: self._stored[key]})
        return rag

    def _valid(self, key: str) -> bool:
        try:
            RagConfig.model_validate({RAG_KEYS[key]: self._stored[key]})
        except ValidationError:
            log.warning("setting %s holds an invalid value; engine.yaml applies", key)
            return False
        return True
