"""A BERT encoder's forward pass in numpy: what MiniLM needs, without torch.

Kept apart from `minilm.py` (which finds and checks the weights) because this is pure numerics:
exact-erf GELU, layer norm, six attention/FFN layers over packed (unpadded) tokens, and attention
run in groups of texts of similar length so padding costs little.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

# Rows of the FFN's intermediate activations processed per GELU pass: 128 x 1536 float32 is 768 KiB,
# small enough for the ~20 elementwise passes to stay in L2 instead of streaming through RAM.
_GELU_ROWS = 128
# See _attention_groups: extra padded score cells (per head) worth one more attention group.
_GROUP_OVERHEAD = 512
# Cap on one group's score cells per head (n * max_len²): 64 texts of 256 tokens would otherwise need
# a 200 MB score tensor; 2**20 cells x 12 heads x 4 bytes is 48 MB, still whole-group matmuls.
# The ONNX runtime cuts its padded batches at the same cap (onnx/runtime.py).
MAX_GROUP_CELLS = 1 << 20

F32 = npt.NDArray[np.float32]
_IntArray = npt.NDArray[np.intp]


# Abramowitz & Stegun 7.1.26 (|error of erf| ≤ 1.5e-7), with constants pre-folded: the argument is
# |x|/√2, and the coefficients are halved because GELU needs Φ(-|x|) = erfc(|x|/√2) / 2.
_AS_P = np.float32(0.3275911 / math.sqrt(2.0))
_AS_A = tuple(np.float32(a / 2.0) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_MINUS_HALF = np.float32(-0.5)


def _gelu_inplace(x: F32) -> None:
    """BERT's exact (erf) GELU, x·Φ(x), overwriting `x`.

    numpy has no erf and tanh-GELU is a different function, so Φ comes from A&S 7.1.26 (max GELU
    error ~3e-7). Written as relu(x) - |x|·Φ(-|x|), which needs no sign select (`np.where` /
    masked copies are several times slower than the arithmetic); callers pass row chunks so the
    few temporaries stay cache-sized.
    """
    a = np.abs(x)
    t = a * _AS_P
    t += 1
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = _AS_A
    q = t * a5
    for coef in (a4, a3, a2, a1):
        q += coef
        q *= t
    e = a * _MINUS_HALF
    e *= a
    np.exp(e, out=e)  # exp(-x²/2)
    q *= e  # Φ(-|x|)
    q *= a
    np.maximum(x, 0, out=x)
    x -= q


def _linear(x: F32, w: F32, b: F32) -> F32:
    out = x @ w
    out += b
    return cast(F32, out)  # numpy's stubs widen float32 @ float32 to floating[Any]


def _layer_norm_inplace(x: F32, gamma: F32, beta: F32, eps: np.float32) -> F32:
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None]  # row dot products: no squared temporary
    var *= np.float32(1.0 / x.shape[-1])
    var += eps
    np.sqrt(var, out=var)
    x /= var
    x *= gamma
    x += beta
    return x


@dataclass(frozen=True, slots=True)
class _Layer:
    """One encoder layer, with Linear weights transposed to [in, out] so `h @ w` needs no copy."""

    w_qkv: F32  # [hidden, 3*hidden]; the query third is pre-scaled by 1/sqrt(head_dim)
    b_qkv: F32
    w_attn_out: F32
    b_attn_out: F32
    ln1_gamma: F32
    ln1_beta: F32
    w_in: F32
    b_in: F32
    w_out: F32
    b_out: F32
    ln2_gamma: F32
    ln2_beta: F32


class Bert:
    """A BERT encoder forward pass in numpy, float32 throughout.

    Token-wise work (embeddings, projections, FFN, LayerNorm) runs on the batch's tokens packed
    without padding, [total_tokens, hidden]; only attention scatters them into a padded
    [batch, heads, len, len] layout. Padding therefore costs nothing outside attention.
    """

    def __init__(self, weights: dict[str, npt.NDArray[Any]], config: dict[str, Any]) -> None:
        if config.get("hidden_act") != "gelu":
            raise ValueError(f"unsupported hidden_act {config.get('hidden_act')!r}")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        self.eps = np.float32(config["layer_norm_eps"])
        self.max_positions = int(config["max_position_embeddings"])

        def plain(name: str) -> F32:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def linear(name: str) -> F32:
            return np.ascontiguousarray(weights[name].T, dtype=np.float32)

        self.word_embeddings = plain("embeddings.word_embeddings.weight")
        # Every token has token_type 0, so its embedding folds into the position table.
        self.position_embeddings = (
            plain("embeddings.position_embeddings.weight") + plain("embeddings.token_type_embeddings.weight")[0]
        )
        self.ln_gamma = plain("embeddings.LayerNorm.weight")
        self.ln_beta = plain("embeddings.LayerNorm.bias")
        scale = np.float32(1.0 / math.sqrt(self.head_dim))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            s = p + "attention.self."
            self.layers.append(
                _Layer(
                    w_qkv=np.ascontiguousarray(
                        np.concatenate(
                            [linear(s + "query.weight") * scale, linear(s + "key.weight"), linear(s + "value.weight")],
                            axis=1,
                        )
                    ),
                    b_qkv=np.concatenate(
                        [plain(s + "query.bias") * scale, plain(s + "key.bias"), plain(s + "value.bias")]
                    ),
                    w_attn_out=linear(p + "attention.output.dense.weight"),
                    b_attn_out=plain(p + "attention.output.dense.bias"),
                    ln1_gamma=plain(p + "attention.output.LayerNorm.weight"),
                    ln1_beta=plain(p + "attention.output.LayerNorm.bias"),
                    w_in=linear(p + "intermediate.dense.weight"),
                    b_in=plain(p + "intermediate.dense.bias"),
                    w_out=linear(p + "output.dense.weight"),
                    b_out=plain(p + "output.dense.bias"),
                    ln2_gamma=plain(p + "output.LayerNorm.weight"),
                    ln2_beta=plain(p + "output.LayerNorm.bias"),
                )
            )

    def mean_pooled(self, ids: Sequence[Sequence[int]]) -> F32:
        """Mean of the last hidden states over each sequence's tokens: [len(ids), hidden], unnormalised."""
        n = len(ids)
        lengths = np.fromiter((len(s) for s in ids), dtype=np.intp, count=n)
        total = int(lengths.sum())
        starts = np.zeros(n, dtype=np.intp)
        np.cumsum(lengths[:-1], out=starts[1:])
        positions = np.arange(total, dtype=np.intp) - np.repeat(starts, lengths)
        flat_ids = np.fromiter((t for s in ids for t in s), dtype=np.intp, count=total)

        h = self.word_embeddings[flat_ids]
        h += self.position_embeddings[positions]
        _layer_norm_inplace(h, self.ln_gamma, self.ln_beta, self.eps)
        groups = _attention_groups(lengths)
        for layer in self.layers:
            h = self._layer(h, layer, groups)

        pooled = np.add.reduceat(h, starts, axis=0)
        pooled /= lengths[:, None].astype(np.float32)
        return pooled

    def _layer(self, h: F32, layer: _Layer, groups: list[_Group]) -> F32:
        qkv = _linear(h, layer.w_qkv, layer.b_qkv)
        if len(groups) == 1:
            context = self._attention(qkv, groups[0])
        else:
            context = np.empty((h.shape[0], self.hidden), dtype=np.float32)
            for g in groups:
                context[g.start : g.stop] = self._attention(qkv[g.start : g.stop], g)
        a = _linear(context, layer.w_attn_out, layer.b_attn_out)
        a += h
        h = _layer_norm_inplace(a, layer.ln1_gamma, layer.ln1_beta, self.eps)
        inter = _linear(h, layer.w_in, layer.b_in)
        for row in range(0, inter.shape[0], _GELU_ROWS):
            _gelu_inplace(inter[row : row + _GELU_ROWS])
        out = _linear(inter, layer.w_out, layer.b_out)
        out += h
        return _layer_norm_inplace(out, layer.ln2_gamma, layer.ln2_beta, self.eps)

    def _attention(self, qkv: F32, g: _Group) -> F32:
        """Multi-head self-attention of one group's packed [tokens, 3*hidden] projections.

        Scores are computed transposed, [n, heads, key, query], so the softmax's max and sum reduce
        over a non-innermost axis: numpy vectorises those across queries, whereas reducing short
        innermost rows (length ≈ sentence length) pays per-row overhead and was ~2x slower.
        """
        if g.slots is not None:
            padded = np.zeros((g.n * g.max_len, qkv.shape[1]), dtype=np.float32)
            padded[g.slots] = qkv
        else:
            padded = qkv
        x = padded.reshape(g.n, g.max_len, 3, self.heads, self.head_dim).transpose(2, 0, 3, 1, 4)
        q, k, v = x[0], x[1], x[2]  # [n, heads, len, head_dim] views
        scores = k @ q.transpose(0, 1, 3, 2)  # [n, heads, key, query]
        if g.key_bias is not None:
            scores += g.key_bias
        scores -= scores.max(axis=2, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=2, keepdims=True)
        context = scores.transpose(0, 1, 3, 2) @ v  # [n, heads, query, head_dim]
        flat = context.transpose(0, 2, 1, 3).reshape(g.n * g.max_len, self.hidden)
        return cast(F32, flat[g.slots]) if g.slots is not None else flat


@dataclass(frozen=True, slots=True)
class _Group:
    """Consecutive sequences that share one padded attention computation.

    `start:stop` is their token range in the packed batch; `slots` maps those tokens into the
    padded [n * max_len] layout and `key_bias` masks padded keys (both None when nothing is padded).
    """

    start: int
    stop: int
    n: int
    max_len: int
    slots: _IntArray | None
    key_bias: F32 | None


def _attention_groups(lengths: _IntArray) -> list[_Group]:
    """Splits a batch into attention groups so padding doesn't dominate attention's cost.

    Attention work grows with n * max_len², so one sequence of 70 tokens in a batch of 64 short
    ones would make every sequence pay for 70x70 scores. A new group starts when the padded work
    would exceed the real work by more than `_GROUP_OVERHEAD` score cells, the rough cost of the
    extra numpy calls a group needs (tuned on benchmark_sentences: 1 group → 11 groups per batch of
    64 took throughput from ~160 to ~290 sentences/s), or when the group's score tensor would exceed
    `MAX_GROUP_CELLS`. Works for any order; length-sorted batches give few groups.
    """
    bounds: list[tuple[int, int]] = []
    first, real, max_len = 0, 0, 0
    for j, length in enumerate(lengths.tolist()):
        new_max = max(max_len, length)
        cells = (j - first + 1) * new_max * new_max
        if j > first and (cells - (real + length * length) > _GROUP_OVERHEAD or cells > MAX_GROUP_CELLS):
            bounds.append((first, j))
            first, real, new_max = j, 0, length
        real += length * length
        max_len = new_max
    bounds.append((first, len(lengths)))

    groups = []
    token = 0
    for lo, hi in bounds:
        sub = lengths[lo:hi]
        n, max_len, count = hi - lo, int(sub.max()), int(sub.sum())
        slots: _IntArray | None = None
        key_bias: F32 | None = None
        if n * max_len != count:
            offsets = np.zeros(n, dtype=np.intp)
            np.cumsum(sub[:-1], out=offsets[1:])
            within = np.arange(count, dtype=np.intp) - np.repeat(offsets, sub)
            slots = np.repeat(np.arange(n, dtype=np.intp) * max_len, sub) + within
            # Additive mask in the transposed [n, 1, key, query] score layout (see _Bert._attention).
            valid = np.arange(max_len)[None, :] < sub[:, None]
            key_bias = np.where(valid, np.float32(0.0), np.float32(-1e30)).astype(np.float32)[:, None, :, None]
        groups.append(_Group(token, token + count, n, max_len, slots, key_bias))
        token += count
    return groups
