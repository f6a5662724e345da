"""The ONNX embedder through a running engine: recall works on int8 vectors, and a home whose vectors
come from the int8 graph does not start on the fp32 one (its vectors are another space: decision 140),
which would otherwise mix the two silently; the error says to run `klaw reindex`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.memory.embedder.minilm import INT8_MODEL_ID
from klaw.store.protocol import IndexMismatchError
from tests.engine.harness import running_engine
from tests.engine.test_recall_end_to_end import FACT, ask, conversation
from tests.memory.test_onnx_embedder import _embed


@pytest.fixture(scope="module")
def int8_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The int8 graph built once, copied into each test's home (quantizing takes seconds)."""
    cache = tmp_path_factory.mktemp("built") / "embedder"
    _embed("onnx-int8", cache, ["warm"])
    return cache


async def test_recall_on_int8_vectors_and_no_silent_switch_to_fp32(tmp_path: Path, int8_cache: Path) -> None:
    shutil.copytree(int8_cache, KlawHome(tmp_path / "home").embedder_cache)
    async with running_engine(tmp_path, embedder={"backend": "minilm", "runtime": "onnx-int8"}) as h:
        await h.engine.embedder.embed(["loaded before the first turn waits on it"])
        await conversation(h)
        for question in ["Zorblax", "What was the name of my sister's dog?"]:
            blocks = await ask(h, question)
            assert len(blocks) == 1 and FACT in blocks[0], question
        assert await ask(h, "ok thanks") == []
        bound = await h.engine.store.vectors.bound_embedder()
        assert bound is not None and bound.embedder_id == INT8_MODEL_ID
    with pytest.raises(IndexMismatchError, match="klaw reindex"):
        async with running_engine(tmp_path, embedder={"backend": "minilm", "runtime": "onnx-fp32"}):
            pass
