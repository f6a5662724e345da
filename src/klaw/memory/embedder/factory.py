"""Builds the configured embedder; the one place that knows every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from klaw.config import EmbedderConfig
from klaw.llm.http import Sleep
from klaw.memory.embedder.protocol import Embedder


def create_embedder(
    config: EmbedderConfig, env: Mapping[str, str] | None = None, *, sleep: Sleep = asyncio.sleep
) -> Embedder:
    """A ready embedder for `config`. Local models load lazily, on the first `embed`.

    `sleep` is how a remote embedder waits between HTTP retries: the engine passes its clock's, so
    retries keep the engine's time (and tests never really wait).
    """
    if config.backend == "minilm":
        from klaw.memory.embedder.minilm import MiniLmEmbedder

        return MiniLmEmbedder(batch_size=config.batch_size, threads=config.threads)
    if config.backend == "e5":
        from klaw.memory.embedder.e5 import E5Embedder

        return E5Embedder(batch_size=config.batch_size, threads=config.threads)
    if config.backend == "openai":
        from klaw.memory.embedder.openai_embedder import OpenAiEmbedder

        return OpenAiEmbedder(config, sleep=sleep) if env is None else OpenAiEmbedder(config, env=env, sleep=sleep)
    from klaw.memory.embedder.fake import FakeEmbedder

    return FakeEmbedder(dim=config.dim or 384)
