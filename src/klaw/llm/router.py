"""Which model serves which request: configured ids → lazily built, cached `ChatModel`s.

Clients are built on first use so a configured but unreachable (or key-less) model costs nothing
until someone routes to it. Models on the same base URL share one HTTP connection pool, since a
typical setup puts several models behind one Ollama or OpenRouter endpoint.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Literal

import httpx

from klaw.config import ModelConfig
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.endpoint import Sleep
from klaw.llm.http_client import new_http_client
from klaw.llm.openai_client import OpenAiChatClient
from klaw.llm.protocol import ChatModel

Task = Literal["summarization", "subagent"]
ModelFactory = Callable[[str, ModelConfig], ChatModel]


class ModelRouter:
    """Hands out the `ChatModel` for a model id, the routing default, or a task.

    `factory` replaces the OpenAI-compatible client (tests, benchmarks with scripted models);
    `sleep` and `env` are passed to the clients the router builds itself. `lent`: the factory's models
    are the caller's, left open by `aclose` (a library program's `model=`, which may serve another
    `Klaw` after this one closed: decision 365).
    """

    def __init__(
        self,
        catalogue: ModelCatalogue,
        *,
        factory: ModelFactory | None = None,
        sleep: Sleep = asyncio.sleep,
        env: Mapping[str, str] = os.environ,
        lent: bool = False,
    ) -> None:
        self.catalogue = catalogue
        self._factory = factory
        self._lent = lent
        self._sleep = sleep
        self._env = env
        self._models: dict[str, ChatModel] = {}
        self._http: dict[str, httpx.AsyncClient] = {}
        self._closed = False

    @property
    def model_ids(self) -> tuple[str, ...]:
        """Every configured model id, sorted (for `/models` and error messages)."""
        return self.catalogue.ids

    @property
    def default(self) -> ChatModel:
        return self.client(self.catalogue.routing.default)

    def for_task(self, task: Task) -> ChatModel:
        """The model routed to `task` (`routing.tasks.*`), else the default."""
        if task == "summarization":
            return self.client(self.catalogue.routing.summarization_model)
        if task == "subagent":
            return self.client(self.catalogue.routing.subagent_model)
        raise ValueError(f"unknown task {task!r}; expected 'summarization' or 'subagent'")

    def client(self, model_id: str) -> ChatModel:
        """The model with this id, built on first use. Unknown ids raise `UnknownModelError`."""
        if self._closed:
            raise RuntimeError("the model router is closed")
        model = self._models.get(model_id)
        if model is not None:
            return model
        config = self.catalogue.get(model_id)
        model = self._factory(model_id, config) if self._factory else self._build(model_id, config)
        self._models[model_id] = model
        return model

    def stand_in(self, model_id: str) -> str | None:
        """The name of the model the `factory` gives for `model_id` (a program's `FunctionModel`:
        `function:<its function>`), for `/status` to say who answers instead of the configured server;
        None when the configured client answers (or the id is unknown)."""
        if self._factory is None or self._closed or model_id not in self.catalogue.ids:
            return None
        return self.client(model_id).model_id

    async def aclose(self) -> None:
        """Close every model handed out (but lent ones) and the shared connection pools. Safe to call twice."""
        self._closed = True
        models, self._models = [] if self._lent else list(self._models.values()), {}
        pools, self._http = list(self._http.values()), {}
        for model in models:
            await model.aclose()
        for pool in pools:
            await pool.aclose()

    def _build(self, model_id: str, config: ModelConfig) -> ChatModel:
        key = config.base_url.rstrip("/")
        http = self._http.get(key)
        if http is None:
            http = self._http[key] = new_http_client(key)
        return OpenAiChatClient(model_id, config, http=http, sleep=self._sleep, env=self._env)
