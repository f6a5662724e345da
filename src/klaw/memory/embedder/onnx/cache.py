"""The ONNX files of the local embedder, built on first use and kept in `KLAW_HOME/cache/embedder/`.

Nothing is downloaded: the fp32 graph is written from the weights the wheel ships (`graph.py`) and
the int8 one is onnxruntime's dynamic quantization of it (weights of most Linear layers to int8 per
output channel, activations quantized per call; `graph.kept_in_float` says what stays float). Building takes
seconds, quantizing up to a minute on a Raspberry Pi, so the result is cached.

A file's name carries its key, the weights' sha256 + the graph builder's version + the precision,
so another wheel or builder means another file (stale ones are removed when a new one is written).
The key is also stored in the model's metadata and checked on load: a file that does not load or
names another key (a damaged disk, a hand copy) is rebuilt with a warning, never a traceback.
Written atomically, mode 0600 in a 0700 folder, like everything klaw writes.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from klaw.atomic_file import replace_file
from klaw.memory.embedder.bert import Bert
from klaw.memory.embedder.protocol import EmbedderError
from klaw.private_files import private_dirs

if TYPE_CHECKING:
    import onnx


Precision = Literal["fp32", "int8"]
# Bump when graph.py or the quantization settings change what a cached file computes.
GRAPH_VERSION = 1
KEY_METADATA = "klaw_cache_key"
_PREFIX = "minilm-"


@dataclass(frozen=True, slots=True)
class CacheKey:
    weights_sha256: str
    precision: Precision

    @property
    def text(self) -> str:
        return f"{self.weights_sha256[:16]}-g{GRAPH_VERSION}-{self.precision}"

    @property
    def file_name(self) -> str:
        return f"{_PREFIX}{self.text}.onnx"


def model_bytes(key: CacheKey, make_bert: Callable[[], Bert]) -> bytes:
    """The serialized model for `key`, built now (seconds; int8 adds the quantization)."""
    # Imported here: `onnx` and the quantizer are needed only when a file is (re)built.
    import onnx

    from klaw.memory.embedder.onnx.graph import build_graph

    model = build_graph(make_bert())
    if key.precision == "int8":
        model = _quantized(model)
    onnx.helper.set_model_props(model, {KEY_METADATA: key.text})
    data: bytes = model.SerializeToString()
    return data


def _quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from klaw.memory.embedder.onnx.graph import kept_in_float

    root = logging.getLogger()
    root.addFilter(_quantizer_advice)
    with tempfile.TemporaryDirectory(prefix="klaw-quantize-") as tmp:
        out = Path(tmp) / "int8.onnx"
        try:
            quantize_dynamic(
                model,
                out,
                # u8 weights: with s8 ones, AVX2's u8·s8 instruction saturates (cosine to fp32 fell to 0.91).
                weight_type=QuantType.QUInt8,
                op_types_to_quantize=["MatMul"],
                nodes_to_exclude=kept_in_float(model),
                per_channel=True,
                extra_options={"MatMulConstBOnly": True},
            )
        finally:
            root.removeFilter(_quantizer_advice)
        return onnx.load(str(out))


def _quantizer_advice(record: logging.LogRecord) -> bool:
    """False for the quantizer's advice to pre-process the model, logged on the root logger (our graph
    has its shapes; the advice would reach the user's terminal as a warning about nothing)."""
    return "onnxruntime" not in record.pathname


def cached_model(cache_dir: Path | None, key: CacheKey, make_bert: Callable[[], Bert]) -> bytes | Path:
    """The model for `key`: the cached file's path when there is one (the session checks it can be
    used), else built now, and cached when `cache_dir` is given."""
    if cache_dir is None:
        return model_bytes(key, make_bert)
    path = cache_dir / key.file_name
    if path.is_file():
        return path
    return write(cache_dir, key, model_bytes(key, make_bert))


def write(cache_dir: Path, key: CacheKey, data: bytes) -> Path:
    """`data` atomically at `key`'s path (0600, folder 0700); other keys of this precision removed."""
    try:
        private_dirs(cache_dir)  # cache/ above it too
        cache_dir.chmod(0o700)
        path = cache_dir / key.file_name
        replace_file(path, data, new_file_mode=0o600)
        for stale in cache_dir.glob(f"{_PREFIX}*-{key.precision}.onnx"):
            if stale.name != key.file_name:
                stale.unlink(missing_ok=True)
    except OSError as exc:
        raise EmbedderError(
            f"Could not write the embedder's ONNX cache in {cache_dir} ({exc.strerror or exc}). "
            "Free some disk space or make the folder writable, or set embedder.runtime: numpy."
        ) from exc
    return path
