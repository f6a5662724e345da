"""Builds the configured embedder; the one place that knows every backend."""

from __future__ import annotations

from collections.abc import Mapping

from klaw.config import EmbedderConfig
from klaw.memory.embedder.protocol import Embedder


def create_embedder(config: EmbedderConfig, env: Mapping[str, str] | None = None) -> Embedder:
    """A ready embedder for `config`. Local models load lazily, on the first `embed`."""
    if config.backend == "minilm":
        from klaw.memory.embedder.minilm import MiniLmEmbedder

        return MiniLmEmbedder(batch_size=config.batch_size, threads=config.threads)
    if config.backend == "openai":
        from klaw.memory.embedder.openai_embedder import OpenAiEmbedder

        return OpenAiEmbedder(config) if env is None else OpenAiEmbedder(config, env=env)
    from klaw.memory.embedder.fake import FakeEmbedder

    return FakeEmbedder(dim=config.dim or 384)
