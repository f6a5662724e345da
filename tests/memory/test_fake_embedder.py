"""FakeEmbedder (hashed bag of words) and the embedder benchmark, which runs on it here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from klaw.bench.embedder_bench import benchmark_sentences, measure_embedder
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.protocol import Embedder

TEXT = "Hello, hello WORLD — café!"
# hello x2 → bucket 39 (+), world → 216 (+), café → 87 (-); divided by the norm √6. Fixed here so a
# change of hash, tokenisation or normalisation (which would orphan stored fake vectors) is caught.
EXPECTED = {39: 2 / np.sqrt(6), 216: 1 / np.sqrt(6), 87: -1 / np.sqrt(6)}


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


async def test_model_id_dim_and_protocol() -> None:
    embedder = FakeEmbedder(dim=64)
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "fake-hash-64"
    assert embedder.dim == 64
    vectors = await embedder.embed(["a b c", "d"])
    assert vectors.shape == (2, 64)
    assert vectors.dtype == np.float32
    assert FakeEmbedder().model_id == "fake-hash-384"


async def test_fixed_values_for_one_text() -> None:
    vector = (await FakeEmbedder().embed([TEXT]))[0]
    assert set(np.flatnonzero(vector).tolist()) == set(EXPECTED)
    for bucket, value in EXPECTED.items():
        assert vector[bucket] == pytest.approx(value, abs=1e-7)


def test_same_vector_in_another_process_with_another_hash_seed() -> None:
    code = (
        "import asyncio, json, sys; from klaw.memory.embedder.fake import FakeEmbedder; "
        "v = asyncio.run(FakeEmbedder().embed([sys.argv[1]]))[0]; "
        "print(json.dumps({int(i): float(v[i]) for i in v.nonzero()[0]}))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", code, TEXT], env=env, capture_output=True, text=True, check=True)
        got = {int(k): v for k, v in json.loads(result.stdout).items()}
        assert got.keys() == EXPECTED.keys()
        for bucket, value in EXPECTED.items():
            assert got[bucket] == pytest.approx(value, abs=1e-7)


async def test_deterministic_and_unit_length() -> None:
    texts = ["the cat sat on the mat", "Quarterly revenue grew in the north", "x"]
    first = await FakeEmbedder().embed(texts)
    second = await FakeEmbedder().embed(texts)
    assert first.tobytes() == second.tobytes()
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)


async def test_shared_words_score_higher_than_unrelated() -> None:
    query, related, unrelated = await FakeEmbedder().embed(
        ["where did the cat sleep", "The cat slept on the sofa", "quarterly revenue grew in logistics"]
    )
    assert cos(query, related) > 0.3
    assert cos(query, related) > cos(query, unrelated) + 0.3


async def test_case_and_punctuation_do_not_matter() -> None:
    a, b = await FakeEmbedder().embed(["Coffee, please!", "coffee please"])
    assert a.tobytes() == b.tobytes()


async def test_texts_without_words_share_one_unit_vector() -> None:
    vectors = await FakeEmbedder().embed(["", "   ", "?!…"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors[0].tobytes() == vectors[1].tobytes() == vectors[2].tobytes()


async def test_empty_list() -> None:
    vectors = await FakeEmbedder(dim=16).embed([])
    assert vectors.shape == (0, 16)
    assert vectors.dtype == np.float32


async def test_rows_that_cancel_out_stay_unit_length() -> None:
    # With dim=1 every word lands in the same bucket, so opposite signs can cancel exactly.
    embedder = FakeEmbedder(dim=1)
    words = [f"w{i}" for i in range(200)]
    signs = {w: embedder._slot(w)[1] for w in words}
    plus = next(w for w in words if signs[w] > 0)
    minus = next(w for w in words if signs[w] < 0)
    vectors = await embedder.embed([f"{plus} {minus}"])
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0)


# --- the embedder benchmark ---------------------------------------------------------------------------


def test_benchmark_sentences_are_deterministic_and_varied() -> None:
    texts = benchmark_sentences(300, seed=7)
    assert texts == benchmark_sentences(300, seed=7)
    assert texts != benchmark_sentences(300, seed=8)
    assert len(set(texts)) > 250
    words = [len(t.split()) for t in texts]
    assert min(words) <= 8
    assert max(words) >= 35


async def test_measure_embedder_reports_every_batch_size() -> None:
    texts = benchmark_sentences(50)
    advanced: list[int] = []
    result = await measure_embedder(FakeEmbedder(), texts=texts, batch_sizes=(1, 16), progress=advanced.append)
    assert result.model_id == "fake-hash-384"
    assert result.texts == 50
    assert [m.batch_size for m in result.batches] == [1, 16]
    assert result.for_batch_size(1).calls == 50
    assert result.for_batch_size(16).calls == 4  # 16 + 16 + 16 + 2
    for m in result.batches:
        assert m.sentences == 50
        assert m.sentences_per_second > 0
        assert 0 <= m.ms_per_call_p50 <= m.ms_per_call_p95
    assert sum(advanced) == 100


async def test_measure_embedder_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="texts"):
        await measure_embedder(FakeEmbedder(), texts=[])
    with pytest.raises(ValueError, match="batch"):
        await measure_embedder(FakeEmbedder(), texts=["a"], batch_sizes=(0,))
