"""OpenAiEmbedder against the fake OpenAI server: batching, ordering, dim check, normalisation, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from klaw.config import EmbedderConfig
from klaw.llm.errors import LlmAuthError
from klaw.llm.fake_server import FakeOpenAiServer, fake_embedding
from klaw.memory.embedder.openai_embedder import OpenAiEmbedder
from klaw.memory.embedder.protocol import Embedder, EmbedderError

DIM = 16
EmbedderFactory = Callable[..., OpenAiEmbedder]


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAiServer]:
    async with FakeOpenAiServer(embedding_dim=DIM) as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
async def make_embedder(server: FakeOpenAiServer, sleeps: list[float]) -> AsyncIterator[EmbedderFactory]:
    made: list[OpenAiEmbedder] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    def factory(*, env: dict[str, str] | None = None, max_retries: int = 3, **fields: Any) -> OpenAiEmbedder:
        defaults = {"backend": "openai", "base_url": server.base_url, "model": "nomic-embed-text", "dim": DIM}
        embedder = OpenAiEmbedder(
            EmbedderConfig(**{**defaults, **fields}), sleep=record_sleep, env=env or {}, max_retries=max_retries
        )
        made.append(embedder)
        return embedder

    yield factory
    for embedder in made:
        await embedder.aclose()


def _expected(texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
    raw = np.array([fake_embedding(t, DIM) for t in texts], dtype=np.float32)
    unit: np.ndarray[Any, np.dtype[np.float32]] = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return unit


async def test_batches_of_batch_size(server: FakeOpenAiServer, make_embedder: EmbedderFactory) -> None:
    texts = [f"text number {i}" for i in range(150)]

    vectors = await make_embedder(batch_size=64).embed(texts)

    assert [len(r.body["input"]) for r in server.requests] == [64, 64, 22]
    assert all(r.path == "/v1/embeddings" and r.body["model"] == "nomic-embed-text" for r in server.requests)
    assert vectors.shape == (150, DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, _expected(texts), rtol=1e-5, atol=1e-6)


async def test_rows_follow_the_index_not_the_list_order(
    server: FakeOpenAiServer, make_embedder: EmbedderFactory
) -> None:
    server.reverse_embeddings = True
    texts = ["alpha", "beta", "gamma"]

    vectors = await make_embedder().embed(texts)

    np.testing.assert_allclose(vectors, _expected(texts), rtol=1e-5, atol=1e-6)


async def test_rows_are_unit_length(make_embedder: EmbedderFactory) -> None:
    vectors = await make_embedder().embed(["one", "two", "three"])

    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(np.linalg.norm(fake_embedding("one", DIM)), 1.0)  # the server's are not


async def test_wrong_dim_says_what_to_fix(server: FakeOpenAiServer, make_embedder: EmbedderFactory) -> None:
    server.embedding_dim = 8

    with pytest.raises(EmbedderError, match="8-dimensional") as caught:
        await make_embedder().embed(["x"])

    assert "embedder.dim" in str(caught.value)
    assert "klaw reindex" in str(caught.value)


async def test_identity_and_protocol(make_embedder: EmbedderFactory) -> None:
    embedder = make_embedder()

    assert isinstance(embedder, Embedder)
    assert embedder.model_id == f"openai:nomic-embed-text@{DIM}"
    assert embedder.dim == DIM


async def test_no_texts_no_request(server: FakeOpenAiServer, make_embedder: EmbedderFactory) -> None:
    vectors = await make_embedder().embed([])

    assert vectors.shape == (0, DIM)
    assert server.requests == []


async def test_429_is_retried_like_the_chat_client(
    server: FakeOpenAiServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    server.reply_error(429, retry_after=2, endpoint="embeddings")
    embedder = make_embedder(api_key_env="EMBED_KEY", env={"EMBED_KEY": "sk-embed"})

    vectors = await embedder.embed(["x"])

    assert vectors.shape == (1, DIM)
    assert sleeps == [2.0]
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer sk-embed"] * 2


async def test_http_errors_become_embedder_errors_with_the_cause(
    server: FakeOpenAiServer, make_embedder: EmbedderFactory
) -> None:
    server.reply_error(401, endpoint="embeddings")

    with pytest.raises(EmbedderError, match="EMBED_KEY") as caught:
        await make_embedder(api_key_env="EMBED_KEY", env={"EMBED_KEY": "sk-embed"}).embed(["secret words"])

    assert isinstance(caught.value.__cause__, LlmAuthError)
    assert "secret words" not in str(caught.value)
    assert "sk-embed" not in str(caught.value)


async def test_a_server_message_that_quotes_an_input_is_left_out(
    server: FakeOpenAiServer, make_embedder: EmbedderFactory
) -> None:
    text = "the alarm code for the back door is 5521, and the spare key is in the shed"
    server.reply_error(400, message=f"input 1 could not be tokenized: '{text[:40]}...'", endpoint="embeddings")
    server.reply_error(400, message="This model's maximum context length is 512 tokens.", endpoint="embeddings")
    embedder = make_embedder()

    with pytest.raises(EmbedderError, match="HTTP 400") as quoting:  # a shortened echo of the input
        await embedder.embed(["a short first text", text])
    with pytest.raises(EmbedderError, match="maximum context length is 512 tokens"):  # quotes nothing: kept
        await embedder.embed(["a short first text", text])

    assert "5521" not in str(quoting.value) and "alarm code" not in str(quoting.value)
    assert "the server's message quotes the request and is left out" in str(quoting.value)


async def test_server_errors_after_retries(
    server: FakeOpenAiServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    for _ in range(2):
        server.reply_error(500, endpoint="embeddings")

    with pytest.raises(EmbedderError, match="HTTP 500"):
        await make_embedder(max_retries=1).embed(["x"])

    assert len(server.requests) == 2
    assert len(sleeps) == 1


async def test_malformed_response(server: FakeOpenAiServer, make_embedder: EmbedderFactory) -> None:
    server.reply_malformed(endpoint="embeddings")

    with pytest.raises(EmbedderError, match="not valid JSON"):
        await make_embedder().embed(["x"])


async def test_an_echo_with_its_escapes_or_punctuation_changed_is_left_out_too(
    server: FakeOpenAiServer, make_embedder: EmbedderFactory
) -> None:
    """adversary13: a server echoing its input as Python's repr (newlines as `\\n`) got a text of short lines
    past the 20-characters-in-a-row rule, into the queue's error and so into every chat's /status."""
    text = "bank: acme\nuser: bob99\npin: 4711\npass: Hunter2!x"
    accented = "rendez-vous chez Hélène à 18h, code 4711 à l'entrée"
    server.reply_error(400, message=f"cannot embed {text!r}", endpoint="embeddings")
    server.reply_error(400, message=f"cannot embed {json.dumps(accented)}", endpoint="embeddings")
    server.reply_error(400, message=f"bad input: {'-'.join(text.split())}", endpoint="embeddings")
    embedder = make_embedder()

    for _ in range(3):
        with pytest.raises(EmbedderError, match="HTTP 400") as caught:
            await embedder.embed([text, accented])
        said = str(caught.value)
        assert "4711" not in said and "Hunter2" not in said and "bob99" not in said, said
        assert "the server's message quotes the request and is left out" in said
