"""Parameter and FLOP counts of one multi-head attention layer, term by term.

Convention: a matrix product (M, K) @ (K, N) costs M*N*K multiply-accumulates (MACs) and
2*M*N*K FLOPs, which is what ``torch.utils.flop_counter.FlopCounterMode`` counts (on CPU in torch
2.13 it does not see inside the fused ``scaled_dot_product_attention`` kernel, so compare with
the explicit path, ``need_weights=True``). Element-wise
work, which FlopCounterMode does not count, is added in :func:`flops` at one FLOP per
operation: a bias add per projection output, the 1/sqrt(d_k) scaling per score, and 5 per
score for the softmax (max, subtract, exp, sum, divide).

Symbols: B batch, L query length, S key/value length, E = d_model, h heads, d_k = E / h.
"""
from .checks import check_heads

MATMUL_TERMS = ("q_proj", "k_proj", "v_proj", "scores", "weighted_sum", "out_proj")
SOFTMAX_FLOPS_PER_SCORE = 5


def parameter_count(embed_dim: int, num_heads: int, bias: bool = True,
                    kdim: int | None = None, vdim: int | None = None) -> dict[str, int]:
    """Parameters per projection and in total. The head count only splits them: 4E^2 (+4E) when kdim = vdim = E."""
    check_heads(embed_dim, num_heads)
    e, b = embed_dim, embed_dim if bias else 0
    counts = {"q_proj": e * e + b, "k_proj": (kdim or e) * e + b, "v_proj": (vdim or e) * e + b,
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
