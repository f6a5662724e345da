"""Builds the configured embedder; the one place that knows every backend."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from klaw.config import EmbedderConfig
from klaw.llm.endpoint import Sleep
from klaw.memory.embedder.protocol import Embedder, EmbedderUnavailable

if TYPE_CHECKING:  # minilm loads numpy and threadpoolctl: only for a minilm home (decision 437)
    from klaw.memory.embedder.minilm import Runtime


def create_embedder(
    config: EmbedderConfig,
    env: Mapping[str, str] | None = None,
    *,
    sleep: Sleep = asyncio.sleep,
    cache_dir: Path | None = None,
) -> Embedder:
    """A ready embedder for `config`. Local models load lazily, on the first `embed`.

    `sleep` is how a remote embedder waits between HTTP retries: the engine passes its clock's, so
    retries keep the engine's time (and tests never really wait). `cache_dir` is where the local
    model's ONNX graphs are kept (`KlawHome.embedder_cache`); without one they are built in memory
    at every start.
    """
    if config.backend in ("minilm", "e5") and (problem := embedder_problem(config)) is not None:
        raise EmbedderUnavailable(problem)  # final: the engine does not start on an embedder that cannot run
    if config.backend == "minilm":
        from klaw.memory.embedder.minilm import MiniLmEmbedder

        return MiniLmEmbedder(
            batch_size=config.batch_size,
            threads=config.threads,
            runtime=local_runtime(config.runtime),
            cache_dir=cache_dir,
        )
    if config.backend == "e5":
        from klaw.memory.embedder.e5 import E5Embedder

        return E5Embedder(batch_size=config.batch_size, threads=config.threads)
    if config.backend == "openai":
        from klaw.memory.embedder.openai_embedder import OpenAiEmbedder

        return OpenAiEmbedder(config, sleep=sleep) if env is None else OpenAiEmbedder(config, env=env, sleep=sleep)
    from klaw.memory.embedder.fake import FakeEmbedder

    return FakeEmbedder(dim=config.dim or 384)


def embedder_problem(config: EmbedderConfig) -> str | None:
    """Why the configured local embedder cannot run in this installation (a package missing), naming the
    fix; None when it can. For `klaw config check` and start-up, before any text waits for a vector: a
    missing package is a broken install, refused at start like a missing sqlite-vec (decision 241)."""
    if config.backend == "e5":
        from klaw.memory.embedder.e5 import unavailable

        return unavailable()
    if config.backend == "minilm":
        from klaw.memory.embedder.minilm import unavailable as minilm_unavailable

        return minilm_unavailable()
    return None


def local_runtime(configured: Literal["auto"] | Runtime) -> Runtime:
    """`embedder.runtime` resolved: `auto` is onnx-fp32 where onnxruntime and onnx are installed (both
    have wheels for x86_64 and aarch64 Linux), else numpy. Both give the same vectors, so which one
    `auto` lands on never changes the embedder's identity (docs/decisions/140-onnx-embedder.md)."""
    if configured == "auto":
        installed = all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))
        return "onnx-fp32" if installed else "numpy"
    return configured
