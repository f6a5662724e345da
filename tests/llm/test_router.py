"""ModelRouter: lazy, cached clients per configured id, task routing, closing."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import pytest

from klaw.config import EngineConfig, ModelConfig, RoutingConfig, RoutingTasks
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.errors import UnknownModelError
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage, ChatResponse, StreamDelta, ToolSpec
from klaw.llm.router import ModelRouter


class ScriptedModel:
    """A ChatModel that answers with its own id, to see which model the router picked."""

    def __init__(self, model_id: str) -> None:
        self._model_id = model_id
        self.closed = False

    @property
    def model_id(self) -> str:
        return self._model_id

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        return ChatResponse(content=self._model_id)

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamDelta, None]:
        yield StreamDelta(content=self._model_id, finish_reason="stop")

    async def aclose(self) -> None:
        self.closed = True


def _config(base_url: str = "http://localhost:11434/v1", *, summarization: str | None = None) -> ModelCatalogue:
    config = EngineConfig(
        models={
            "ollama/llama3.2": ModelConfig(base_url=base_url),
            "ollama/qwen2.5": ModelConfig(base_url=base_url),
            "openrouter/big": ModelConfig(base_url="https://openrouter.ai/api/v1", name="meta/llama-70b"),
        },
        routing=RoutingConfig(default="ollama/llama3.2", tasks=RoutingTasks(summarization=summarization)),
    )
    return ModelCatalogue.from_config(config)


class Built:
    def __init__(self) -> None:
        self.models: list[ScriptedModel] = []

    def __call__(self, model_id: str, config: ModelConfig) -> ScriptedModel:
        model = ScriptedModel(model_id)
        self.models.append(model)
        return model


async def test_clients_are_built_lazily_and_cached() -> None:
    built = Built()
    router = ModelRouter(_config(), factory=built)

    assert built.models == []
    first = router.client("ollama/qwen2.5")
    again = router.client("ollama/qwen2.5")

    assert first is again
    assert [m.model_id for m in built.models] == ["ollama/qwen2.5"]
    await router.aclose()


async def test_default_and_task_routing() -> None:
    router = ModelRouter(_config(summarization="ollama/qwen2.5"), factory=Built())

    assert router.default.model_id == "ollama/llama3.2"
    assert router.for_task("summarization").model_id == "ollama/qwen2.5"
    assert router.for_task("subagent") is router.default  # no subagent route: falls back to the default
    assert router.model_ids == ("ollama/llama3.2", "ollama/qwen2.5", "openrouter/big")
    with pytest.raises(ValueError, match="unknown task"):
        router.for_task("poetry")  # type: ignore[arg-type]
    await router.aclose()


async def test_unknown_model_lists_the_valid_ids() -> None:
    router = ModelRouter(_config(), factory=Built())

    with pytest.raises(UnknownModelError) as caught:
        router.client("gpt-7")

    message = str(caught.value)
    assert "'gpt-7'" in message
    for model_id in ("ollama/llama3.2", "ollama/qwen2.5", "openrouter/big"):
        assert model_id in message


async def test_aclose_closes_every_model_and_the_router() -> None:
    built = Built()
    router = ModelRouter(_config(), factory=built)
    router.client("ollama/llama3.2")
    router.client("openrouter/big")

    await router.aclose()
    await router.aclose()  # idempotent

    assert [m.closed for m in built.models] == [True, True]
    with pytest.raises(RuntimeError, match="closed"):
        router.client("ollama/llama3.2")


async def test_real_clients_reach_the_server_with_provider_names(openai_server: FakeOpenAiServer) -> None:
    router = ModelRouter(_config(openai_server.base_url), env={})
    try:
        first = await router.default.complete([ChatMessage.user("one")])
        second = await router.client("ollama/qwen2.5").complete([ChatMessage.user("two")])
    finally:
        await router.aclose()

    assert (first.content, second.content) == ("echo: one", "echo: two")
    assert [r.body["model"] for r in openai_server.requests] == ["llama3.2", "qwen2.5"]
