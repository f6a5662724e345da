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

from klaw.config import EngineConfig, RagConfig
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
_FLAGS = (SUMMARIZER_ENABLED, EMBEDDINGS_ENABLED, RAG_ENABLED)


class SettingError(ValueError):
    """A `/rag set` that cannot be applied; the message says why, for the person who typed it."""


def parse_rag_value(key: str, raw: str) -> tuple[str, int | float]:
    """Validate `/rag set <key> <value>` as docs/decisions/006-runtime-memory-settings.md says: limits are
    integers > 0, the similarity a number from 0 to 1, the token budget an integer > 0. Returns
    (canonical key, value)."""
    canonical = key if key in RAG_KEYS else f"rag_{key}"
    if canonical not in RAG_KEYS:
        raise SettingError(f"Invalid key. Valid keys: {', '.join(RAG_KEYS)}")
    try:
        value: int | float = float(raw) if "similarity" in canonical else int(raw)
    except ValueError:
        kind = "a number from 0 to 1" if "similarity" in canonical else "a whole number"
        raise SettingError(f"Invalid value for {canonical}: {raw!r} is not {kind}") from None
    if "similarity" in canonical and not 0.0 <= value <= 1.0:
        raise SettingError("Similarity must be between 0 and 1")
    if "limit" in canonical and value <= 0:
        raise SettingError("Limit must be greater than 0")
    if "tokens" in canonical and value <= 0:
        raise SettingError("Token budget must be greater than 0")
    return canonical, value


class MemorySettings:
    def __init__(self, config: EngineConfig, settings: SettingsRepository) -> None:
        self._config = config
        self._settings = settings
        self._stored: dict[str, Any] = {}
        self._rag = config.rag

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
        return bool(self._stored.get(SUMMARIZER_ENABLED, self._config.summarizer.enabled))

    @property
    def embeddings_enabled(self) -> bool:
        return bool(self._stored.get(EMBEDDINGS_ENABLED, self._config.embedder.pipeline_enabled))

    def overridden(self, key: str) -> bool:
        """Whether `key` comes from a command rather than engine.yaml."""
        return key in self._stored and (key not in RAG_KEYS or self._valid(key))

    async def set_flag(self, key: str, on: bool) -> None:
        if key not in _FLAGS:
            raise ValueError(f"unknown switch {key!r}")
        await self._settings.set(key, on)
        self._stored[key] = on
        self._rag = self._merged_rag()

    async def set_rag(self, key: str, raw: str) -> tuple[str, int | float]:
        """`/rag set`: validate, store, apply; raises `SettingError` with the reason."""
        canonical, value = parse_rag_value(key, raw)
        await self._settings.set(canonical, value)
        self._stored[canonical] = value
        self._rag = self._merged_rag()
        return canonical, value

    def _merged_rag(self) -> RagConfig:
        rag = self._config.rag
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
