"""Multi-head attention in NumPy, written to be read next to the equations.

Conventions (those of the papers, not of ``torch.nn.Linear``):

* weights act on the right: ``project(x, w, b) = x @ w + b`` with ``w`` shaped (d_in, d_out);
* activations are (B, T, d), or unbatched (T, d): every function works on any leading axes;
* a mask is boolean (``True`` = this query may attend to this key) or additive (added to the
  scores, ``-inf`` blocks), and broadcasts against the scores (..., T_q, T_k).

    head_i    = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k) + M) V W_i^V
    MultiHead = Concat(head_1, ..., head_h) W^O
"""
from dataclasses import dataclass

import numpy as np

from .checks import check_heads, check_rank, check_same, check_width, fail


@dataclass
class HeadParams:
    """One head's projections, as the per-head equations write them: (d_in, d_k or d_v)."""
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    b_q: np.ndarray | None = None
    b_k: np.ndarray | None = None
    b_v: np.ndarray | None = None


@dataclass
class MHAParams:
    """All heads fused: W^Q is (d_model, d_model), W^K (kdim, d_model), W^V (vdim, d_model)."""
    num_heads: int
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    b_q: np.ndarray | None = None
    b_k: np.ndarray | None = None
    b_v: np.ndarray | None = None
    b_o: np.ndarray | None = None

    def heads(self) -> list[HeadParams]:
        """The same weights seen as h separate heads: head i owns columns i*d_k:(i+1)*d_k."""
        d_k = check_heads(self.w_q.shape[1], self.num_heads)
        cols = [slice(i * d_k, (i + 1) * d_k) for i in range(self.num_heads)]
        cut = lambda b, c: None if b is None else b[c]  # noqa: E731
        return [HeadParams(self.w_q[:, c], self.w_k[:, c], self.w_v[:, c],
                           cut(self.b_q, c), cut(self.b_k, c), cut(self.b_v, c)) for c in cols]


def init_params(embed_dim: int, num_heads: int, rng: np.random.Generator,
                kdim: int | None = None, vdim: int | None = None, bias: bool = True) -> MHAParams:
    """Random parameters for experiments: Glorot-uniform weights, each matrix on its own
    (bound sqrt(6 / (d_in + d_out))), and small random biases. Not torch's initialisation, which
    packs the three input projections into one (3E, E) matrix and zeroes the biases; for that,
    use ``MultiHeadAttention(...).reference_params()``."""
    check_heads(embed_dim, num_heads)
    kdim, vdim = kdim or embed_dim, vdim or embed_dim

    def weight(d_in, d_out):
        bound = np.sqrt(6.0 / (d_in + d_out))
        return rng.uniform(-bound, bound, size=(d_in, d_out))

    def b():
        return rng.normal(0.0, 0.1, size=embed_dim) if bias else None

    return MHAParams(num_heads, weight(embed_dim, embed_dim), weight(kdim, embed_dim),
                     weight(vdim, embed_dim), weight(embed_dim, embed_dim), b(), b(), b(), b())


def project(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """The linear map x W + b: (..., d_in) @ (d_in, d_out) -> (..., d_out)."""
    check_rank("w", w.shape, (2,), "(d_in, d_out)")
    check_width("x", x.shape, w.shape[0], "must equal d_in, the first dimension of w")
    out = x @ w
    if b is not None:
        check_same("b.shape", tuple(b.shape), (w.shape[1],), "(d_out,) to match w")
        out = out + b
    return out


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(..., T, d) -> (..., h, T, d_k): cut the features into h slices, then bring heads forward."""
    check_rank("x", x.shape, (2, 3), "(T, d) or (B, T, d)")
    d_k = check_heads(x.shape[-1], num_heads)
    x = x.reshape(*x.shape[:-1], num_heads, d_k)  # (..., T, h, d_k)
    return np.swapaxes(x, -2, -3)                 # (..., h, T, d_k)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(..., h, T, d_v) -> (..., T, h*d_v): Concat(head_1, ..., head_h) along features."""
    check_rank("x", x.shape, (3, 4), "(h, T, d_v) or (B, h, T, d_v)")
    x = np.swapaxes(x, -2, -3)                            # (..., T, h, d_v)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., T, h*d_v)


def output_projection(x: np.ndarray, w_o: np.ndarray, b_o: np.ndarray | None = None) -> np.ndarray:
    """W^O: mixes the concatenated heads, (..., T, h*d_v) -> (..., T, d_model)."""
    return project(x, w_o, b_o)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax (subtract the row maximum before exponentiating)."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_jacobian(scores: np.ndarray) -> np.ndarray:
    """d softmax(s) / d s for every row of scores (..., S): diag(p) - p p^T, shaped (..., S, S)."""
    p = softmax(scores, axis=-1)[..., :, None]           # (..., S, 1)
    return p * np.eye(p.shape[-2]) - p * np.swapaxes(p, -1, -2)  # (..., S, S)


def causal_mask(q_len: int, k_len: int | None = None) -> np.ndarray:
    """Boolean (T_q, T_k) mask, True on and below the diagonal: query i sees keys 0..i."""
    return np.tril(np.ones((q_len, k_len or q_len), dtype=bool))


def additive_mask(mask: np.ndarray | None, scores_shape: tuple) -> np.ndarray | float:
    """Turn a boolean or additive mask into the additive form, checking it fits the scores."""
    if mask is None:
        return 0.0
    mask = np.asarray(mask)
    if mask.dtype != bool and not np.issubdtype(mask.dtype, np.floating):
        fail("mask", "a boolean (True = may attend) or floating (additive) array", f"dtype {mask.dtype}")
    try:
        np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        fail("mask.shape", f"a shape that broadcasts to the scores {tuple(scores_shape)} (..., T_q, T_k)",
             tuple(mask.shape))
    return np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask


def scaled_dot_product_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                                 mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T / sqrt(d_k) + M) v for (..., T_q, d_k), (..., T_k, d_k), (..., T_k, d_v).

    Returns the output (..., T_q, d_v) and the weights (..., T_q, T_k); each weight row sums to 1.
    """
    check_same("k.shape[-1]", k.shape[-1], q.shape[-1], "q.shape[-1] (queries and keys share d_k)")
    check_same("v.shape[-2]", v.shape[-2], k.shape[-2], "k.shape[-2] (one value per key)")
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., T_q, T_k)
    weights = softmax(scores + additive_mask(mask, scores.shape), axis=-1)
    return weights @ v, weights                                   # (..., T_q, d_v)


def multi_head_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray, params: MHAParams,
                         mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The batched form: one projection per role, then split into heads.

    query (..., T_q, d_model), key (..., T_k, kdim), value (..., T_k, vdim) ->
    output (..., T_q, d_model) and per-head weights (..., h, T_q, T_k).
    A mask broadcasts against (..., h, T_q, T_k): a (T_q, T_k) mask applies to every head.
    """
    h = params.num_heads
    q = split_heads(project(query, params.w_q, params.b_q), h)  # (..., h, T_q, d_k)
    k = split_heads(project(key, params.w_k, params.b_k), h)    # (..., h, T_k, d_k)
    v = split_heads(project(value, params.w_v, params.b_v), h)  # (..., h, T_k, d_v)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)
    return output_projection(merge_heads(heads), params.w_o, params.b_o), weights


def multi_head_attention_loop(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                              heads: list[HeadParams], w_o: np.ndarray, b_o: np.ndarray | None = None,
                              mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-head form, as the equations write it: h separate W_i^Q, W_i^K, W_i^V.

    Same inputs and outputs as :func:`multi_head_attention`; a mask here broadcasts
    against one head's scores (..., T_q, T_k).
    """
    outputs, weights = [], []
    for head in heads:
        out, w = scaled_dot_product_attention(project(query, head.w_q, head.b_q),
                                              project(key, head.w_k, head.b_k),
                                              project(value, head.w_v, head.b_v), mask)
        outputs.append(out)   # (..., T_q, d_v)
        weights.append(w)     # (..., T_q, T_k)
    concat = np.concatenate(outputs, axis=-1)  # (..., T_q, h*d_v)
    return output_projection(concat, w_o, b_o), np.stack(weights, axis=-3)  # (..., h, T_q, T_k)
