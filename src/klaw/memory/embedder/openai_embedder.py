"""An embedder backed by any OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama, vLLM, llama.cpp).

The HTTP request, retries and error mapping are the chat client's (`klaw.llm.http`), so both behave
the same towards a flaky server; failures are re-raised as `EmbedderError` (the embedder contract)
with the specific `LlmError` as `__cause__` for callers that want to tell a rate limit from a
wrong key. A whole call, its retries included, ends at `totalTimeoutSeconds` (ten times `timeoutSeconds`
unless set): the per-read timeout never elapsed for a server trickling a byte now and then, which held
the background embedding queue (and a search's query) forever (decision 311).

The configured `dim` is checked against every answer: vectors of another size would be stored in
an index built for `dim` and silently break search, so a mismatch stops with what to fix.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from klaw.config import EmbedderConfig
from klaw.llm.call_deadline import deadline_of, within_deadline
from klaw.llm.endpoint import Endpoint, RetryPolicy, Sleep
from klaw.llm.errors import LlmError
from klaw.llm.http import RetryingPoster
from klaw.llm.http_client import new_http_client
from klaw.memory.embedder.protocol import EmbedderError, Vectors
from klaw.redaction import mask_url_credentials


class OpenAiEmbedder:
    """Embeds texts in batches of `config.batch_size` via POST `{base_url}/embeddings`.

    `http` shares a connection pool (not closed by `aclose`); otherwise one is made. `env` is where the API
    key variable (`config.api_key_env`) is looked up.
    """

    def __init__(
        self,
        config: EmbedderConfig,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep = asyncio.sleep,
        env: Mapping[str, str] = os.environ,
        max_retries: int = 3,
        retry_policy: RetryPolicy | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not (config.base_url and config.model and config.dim):
            raise EmbedderError("the openai embedder needs embedder.baseUrl, embedder.model and embedder.dim")
        self._model = config.model
        self.dim = config.dim
        self._batch_size = config.batch_size
        # `openai:<model>@<dim>`: names the vector space, so a model or size change forces a reindex
        self.model_id = f"openai:{config.model}@{config.dim}"
        self._owns_http = http is None
        self._http = http if http is not None else new_http_client(config.base_url)
        self._endpoint = Endpoint(
            model_id=self.model_id,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            timeout_seconds=config.timeout_seconds,
            max_retries=max_retries,
            section="embedder",
            total_timeout_seconds=config.call_deadline_seconds,
        )
        self._poster = RetryingPoster(self._http, self._endpoint, env, sleep, retry_policy or RetryPolicy(), rand)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """L2-normalised float32 vectors, one row per text, in the order given."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [
            await self._embed_batch(texts[start : start + self._batch_size])
            for start in range(0, len(texts), self._batch_size)
        ]
        vectors = np.concatenate(batches, axis=0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0  # an all-zero vector stays zero instead of becoming NaN
        normalised: Vectors = (vectors / norms).astype(np.float32)
        return normalised

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _embed_batch(self, texts: Sequence[str]) -> Vectors:
        payload = {"model": self._model, "input": list(texts)}
        try:
            async with within_deadline(self._endpoint, deadline_of(self._endpoint)):  # decision 311
                body = await self._poster.post_json("embeddings", payload)
        except LlmError as exc:
            raise EmbedderError(str(exc)) from exc
        return self._vectors(body, len(texts))

    def _vectors(self, body: Any, expected: int) -> Vectors:
        """Rows ordered by each item's `index` (the API does not promise list order)."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise self._malformed(f"asked for {expected} embeddings, got {got}")
        rows: dict[int, Any] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            embedding = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < expected or index in rows:
                raise self._malformed(f"an embedding has a missing, duplicate or out-of-range index {index!r}")
            if not isinstance(embedding, list):
                raise self._malformed("an embedding is not a list of numbers")
            if len(embedding) != self.dim:
                raise EmbedderError(
                    f"the embedding model {self._model!r} returned {len(embedding)}-dimensional vectors, "
                    f"but embedder.dim is {self.dim}. Set embedder.dim to {len(embedding)} in engine.yaml "
                    "and run `klaw reindex`."
                )
            rows[index] = embedding
        try:
            vectors = np.array([rows[i] for i in range(expected)], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._malformed("an embedding contains something other than numbers") from exc
        if not np.isfinite(vectors).all():
            raise self._malformed("an embedding contains NaN or infinite values")
        return vectors

    def _malformed(self, what: str) -> EmbedderError:
        return EmbedderError(
            f"{what} (model {self.model_id!r} at {mask_url_credentials(self._endpoint.base_url)}). "
            "Check that embedder.baseUrl points at an OpenAI-compatible API (usually ending in /v1)."
        )
