"""Parameter and FLOP counts of one multi-head attention layer, term by term.

Convention: a matrix product (M, K) @ (K, N) costs M*N*K multiply-accumulates (MACs) and
2*M*N*K FLOPs, which is what ``torch.utils.flop_counter.FlopCounterMode`` counts (on CPU in torch
2.13 it does not see inside the fused ``scaled_dot_product_attention`` kernel, so compare with
the explicit path, ``need_weights=True``). Element-wise
work, which FlopCounterMode does not count, is added in :func:`flops` at one FLOP per
operation: a bias add per projection output, the 1/sqrt(d_k) scaling per score, and 5 per
score for the softmax (max, subtract, exp, sum, divide).

Symbols: B batch, L query length, S key/value length, E = d_model, h heads, d_k = E / h,
g key/value heads (grouped-query attention, chapter 7).
"""
from .checks import check_heads, check_kv_heads

MATMUL_TERMS = ("q_proj", "k_proj", "v_proj", "scores", "weighted_sum", "out_proj")
SOFTMAX_FLOPS_PER_SCORE = 5


def parameter_count(embed_dim: int, num_heads: int, bias: bool = True,
                    kdim: int | None = None, vdim: int | None = None,
                    num_kv_heads: int | None = None) -> dict[str, int]:
    """Parameters per projection and in total. The head count only splits them: 4E^2 (+4E) when kdim = vdim = E.

    With g = ``num_kv_heads`` key/value heads, W^K and W^V are E x g d_k instead of E x E.
    """
    d_k = check_heads(embed_dim, num_heads)
    kv = _kv_heads(num_heads, num_kv_heads) * d_k          # g * d_k: E when g = h
    e, b, b_kv = embed_dim, embed_dim if bias else 0, kv if bias else 0
    counts = {"q_proj": e * e + b, "k_proj": (kdim or e) * kv + b_kv, "v_proj": (vdim or e) * kv + b_kv,
              "out_proj": e * e + b}
    counts["total"] = sum(counts.values())
    return counts


def macs(batch: int, q_len: int, kv_len: int, embed_dim: int, num_heads: int,
         kdim: int | None = None, vdim: int | None = None) -> dict[str, int]:
    """Multiply-accumulates of the six matrix products. Heads cancel: h * (E/h) = E."""
    d_k = check_heads(embed_dim, num_heads)
    e, h = embed_dim, num_heads
    counts = {
        "q_proj": batch * q_len * e * e,                   # (B*L, E) @ (E, E)
        "k_proj": batch * kv_len * (kdim or e) * e,        # (B*S, kdim) @ (kdim, E)
        "v_proj": batch * kv_len * (vdim or e) * e,        # (B*S, vdim) @ (vdim, E)
        "scores": batch * h * q_len * kv_len * d_k,        # h x (L, d_k) @ (d_k, S)
        "weighted_sum": batch * h * q_len * kv_len * d_k,  # h x (L, S) @ (S, d_v)
        "out_proj": batch * q_len * e * e,                 # (B*L, E) @ (E, E)
    }
    counts["total"] = sum(counts.values())
    return counts


def flops(batch: int, q_len: int, kv_len: int, embed_dim: int, num_heads: int,
          kdim: int | None = None, vdim: int | None = None, bias: bool = True) -> dict[str, int]:
    """FLOPs per term with every constant counted: 2 per MAC plus the element-wise work."""
    counts = {term: 2 * n for term, n in macs(batch, q_len, kv_len, embed_dim, num_heads, kdim, vdim).items()
              if term != "total"}
    if bias:
        counts["q_proj"] += batch * q_len * embed_dim
        counts["k_proj"] += batch * kv_len * embed_dim
        counts["v_proj"] += batch * kv_len * embed_dim
        counts["out_proj"] += batch * q_len * embed_dim
    n_scores = batch * num_heads * q_len * kv_len
    counts["scores"] += n_scores  # the 1/sqrt(d_k) scaling
    counts["softmax"] = SOFTMAX_FLOPS_PER_SCORE * n_scores
    counts["total"] = sum(counts.values())
    return counts


def _kv_heads(num_heads: int, num_kv_heads: int | None) -> int:
    """g, checked to divide h (None: g = h, full multi-head attention)."""
    g = num_heads if num_kv_heads is None else num_kv_heads
    check_kv_heads(num_heads, g)
    return g


def self_attention_macs(batch: int, new_len: int, cached_len: int, embed_dim: int, num_heads: int,
                        num_kv_heads: int | None = None) -> dict[str, int]:
    """MACs of causal self-attention for ``new_len`` positions that follow ``cached_len`` cached ones.

    Only the new positions are projected (their keys and values join the cache); their queries
    score all S = cached_len + new_len keys. With nothing cached this is :func:`macs` with
    L = S = new_len (the causal mask blocks scores, it does not skip computing them). With g
    key/value heads, W^K and W^V produce g * d_k numbers per position; the scores still cost h heads.
    """
    d_k, g = check_heads(embed_dim, num_heads), _kv_heads(num_heads, num_kv_heads)
    counts = macs(batch, new_len, cached_len + new_len, embed_dim, num_heads)
    counts["k_proj"] = counts["v_proj"] = batch * new_len * embed_dim * g * d_k   # (B*L, E) @ (E, g*d_k)
    counts["total"] = sum(v for term, v in counts.items() if term != "total")
    return counts


def decoder_macs(batch: int, new_len: int, cached_len: int, d_model: int, num_heads: int,
                 dim_feedforward: int, num_layers: int, num_kv_heads: int | None = None) -> dict[str, int]:
    """MACs of a decoder stack (chapter 7) for ``new_len`` new positions after ``cached_len`` cached:
    per layer, the self-attention above and the feed-forward network's two products."""
    attention = self_attention_macs(batch, new_len, cached_len, d_model, num_heads, num_kv_heads)["total"]
    feed_forward = 2 * batch * new_len * d_model * dim_feedforward    # (B*L, E) @ (E, d_ff), then back
    return {"attention": num_layers * attention, "feed_forward": num_layers * feed_forward,
            "total": num_layers * (attention + feed_forward)}


def kv_cache_numbers(batch: int, seq_len: int, d_model: int, num_heads: int, num_layers: int,
                     num_kv_heads: int | None = None) -> int:
    """Numbers a KV cache holds: a key and a value of g * d_k numbers per layer, position and sequence,
    2 * layers * T * d_model per sequence with full multi-head attention (g = h)."""
    d_k, g = check_heads(d_model, num_heads), _kv_heads(num_heads, num_kv_heads)
    return 2 * num_layers * batch * seq_len * g * d_k
