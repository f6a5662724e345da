"""The MiniLM encoder on an onnxruntime session: the numpy encoder's `mean_pooled`, faster.

The session gets `threads` intra-op threads that sleep when idle (no spinning: klaw shares its CPU,
often with a local LLM, and a spinning pool burns a core between queries), no inter-op pool (the
graph is one chain) and no memory arena (idle RSS). Texts arrive sorted by length (see minilm.py);
they are cut into padded batches whose padding stays small, since every padded token costs as much
as a real one outside attention, and whose attention scores stay within the numpy encoder's cap
(`MAX_GROUP_CELLS` per head): 64 texts of 256 tokens in one run held ~700 MB of activations, and
without an arena the process kept much of it from the allocator after the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from klaw.memory.embedder.bert import F32, MAX_GROUP_CELLS, Bert
from klaw.memory.embedder.onnx.cache import KEY_METADATA, CacheKey, cached_model, model_bytes, write
from klaw.memory.embedder.protocol import EmbedderError

if TYPE_CHECKING:
    import onnxruntime

log = logging.getLogger(__name__)

# The graph's inputs (graph.py names them so). Here, not there: graph.py imports the `onnx` package
# (~0.1 s of CPU), which only building the graph needs; a start that finds it cached never loads it.
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"

# A padded batch is cut where padding would add more than this share of its real tokens (plus a
# little slack, so very short texts still go together): each run costs ~0.1 ms of fixed overhead.
_PADDING_SHARE = 0.25
_PADDING_SLACK = 32


class OnnxEncoder:
    """`mean_pooled(ids)` on onnxruntime; the graph also normalises, which the caller repeats harmlessly."""

    def __init__(self, session: onnxruntime.InferenceSession, dim: int) -> None:
        self._session = session
        self._dim = dim

    def mean_pooled(self, ids: Sequence[Sequence[int]]) -> F32:
        out = np.empty((len(ids), self._dim), dtype=np.float32)
        for start, stop in padded_batches([len(s) for s in ids]):
            chunk = ids[start:stop]
            width = max(len(s) for s in chunk)
            input_ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, seq in enumerate(chunk):
                input_ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            (vectors,) = self._session.run(None, {INPUT_IDS: input_ids, ATTENTION_MASK: mask})
            out[start:stop] = vectors
        return out


def padded_batches(lengths: Sequence[int]) -> list[tuple[int, int]]:
    """[start, stop) ranges of consecutive texts run together, for lengths sorted ascending: cut where
    padding would cost too much or the batch's attention scores (texts x width², per head) would pass
    `MAX_GROUP_CELLS`."""
    bounds: list[tuple[int, int]] = []
    first, real = 0, 0
    for i, length in enumerate(lengths):
        padded = (i - first + 1) * length  # sorted: this text is the longest so far
        wasteful = padded > (real + length) * (1 + _PADDING_SHARE) + _PADDING_SLACK
        if i > first and (wasteful or padded * length > MAX_GROUP_CELLS):
            bounds.append((first, i))
            first, real = i, 0
        real += length
    if lengths:
        bounds.append((first, len(lengths)))
    return bounds


def load_encoder(
    key: CacheKey, cache_dir: Path | None, *, dim: int, threads: int, make_bert: Callable[[], Bert]
) -> OnnxEncoder:
    """A session on the cached model for `key`; a cached file that cannot be used is rebuilt once."""
    source = cached_model(cache_dir, key, make_bert)
    if cache_dir is not None and isinstance(source, Path):
        try:
            return OnnxEncoder(_session(source, key, threads), dim)
        except Exception as exc:
            log.warning("The embedder's ONNX cache %s is unusable (%s); rebuilding it.", source, type(exc).__name__)
        source = write(cache_dir, key, model_bytes(key, make_bert))
    try:
        return OnnxEncoder(_session(source, key, threads), dim)
    except Exception as exc:
        raise EmbedderError(
            f"onnxruntime could not load the MiniLM graph built from the weights ({type(exc).__name__}: {exc})."
            " Set embedder.runtime: numpy in engine.yaml to embed without it."
        ) from exc


def _session(source: bytes | Path, key: CacheKey, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # No memory arena: it keeps the largest batch's activations for good (a batch of 64 long texts
    # left an idle session at +295 MB instead of +148 MB); malloc per run costs little beside the matmuls.
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3  # errors only: its warnings would go to stderr, around klaw's own logging
    model = source if isinstance(source, bytes) else str(source)
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    found = session.get_modelmeta().custom_metadata_map.get(KEY_METADATA)
    if found != key.text:
        raise ValueError(f"the file is for {found!r}, not {key.text!r}")
    return session
