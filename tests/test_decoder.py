"""mha_lib.decoder: grouped-query attention, the causal pre-norm decoder and its KV cache (chapter 7).

* grouped_query_attention is F.scaled_dot_product_attention(..., enable_gqa=True) on the same
  tensors, with and without the causal mask, for g = h (MHA), 1 < g < h (GQA) and g = 1 (MQA);
* CausalSelfAttention copied from nn.MultiheadAttention, and Decoder copied from an
  nn.TransformerEncoder of pre-norm layers with a final LayerNorm, compute torch's function, both
  as torch computes it step by step and as its fused fast path does (an even number of heads,
  eval mode, no gradient: the fused operator is seen to run, mha_book.kernels);
* generating with a KV cache, one position or several at a time, gives the full recomputation;
* counting.parameter_count / self_attention_macs / decoder_macs / kv_cache_numbers agree with
  the modules, FlopCounterMode and the cache's own size;
* misuse raises ValueError saying what was expected and what was given.

Float64, all sizes different (N=2, h=6, g in {1, 2, 3, 6}, L=3, S=5, d_k=4, d_v=7, E=12, d_ff=20;
torch's modules: 4 heads, since torch refuses its fused path for an odd number).
"""
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close
from torch.utils.flop_counter import FlopCounterMode

from mha_book.kernels import FUSED_ATTENTION, FUSED_LAYER, OperatorLog
from mha_lib import counting
from mha_lib.block import EncoderBlock
from mha_lib.decoder import CausalSelfAttention, Decoder, KVCache, causal_mask, grouped_query_attention

TOL = dict(rtol=1e-10, atol=1e-10)
N, H, L, S, D_K, D_V, E, D_FF, LAYERS = 2, 6, 3, 5, 4, 7, 12, 20, 3
TORCH_HEADS = 4      # even: torch's fused fast path refuses an odd number of heads ("num_head is odd")
f64 = dict(dtype=torch.float64)


def torch_run(call, path: str):
    """call() with torch on one of its two paths, and a check that it took it: "fused" (no
    gradient, so that the modules, in eval mode, may take their fast path) runs a fused operator;
    "step by step" (gradients on: torch refuses the fast path) runs none."""
    with torch.set_grad_enabled(path == "step by step"), OperatorLog() as log:
        out = call()
    fused = {FUSED_LAYER, FUSED_ATTENTION} & log.names
    assert bool(fused) == (path == "fused"), f"torch's {path} path was not taken: it ran {sorted(log.names)}"
    return out


def qkv(g: int, seed: int, q_len: int = L, kv_len: int = S):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(N, H, q_len, D_K, generator=gen, **f64), torch.randn(N, g, kv_len, D_K, generator=gen, **f64),
            torch.randn(N, g, kv_len, D_V, generator=gen, **f64))


@pytest.mark.parametrize("g", [6, 3, 2, 1])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_is_torchs_enable_gqa(g, causal):
    q, k, v = qkv(g, seed=g + 10 * causal)
    out, weights = grouped_query_attention(q, k, v, causal=causal)
    mask = ~causal_mask(L, S) if causal else None                      # SDPA: True = may attend
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True), **TOL)
    assert out.shape == (N, H, L, D_V) and weights.shape == (N, H, L, S)
    assert_close(weights.sum(-1), torch.ones(N, H, L, **f64), **TOL)


def test_query_head_i_reads_key_value_head_i_over_r():
    """Each query head alone, against its own key/value head (h / g = 3 query heads per group)."""
    q, k, v = qkv(2, seed=5)
    out, _ = grouped_query_attention(q, k, v)
    for i in range(H):
        alone = F.scaled_dot_product_attention(q[:, i], k[:, i // 3], v[:, i // 3])
        assert_close(out[:, i], alone, **TOL)


def test_causal_queries_are_the_last_positions():
    """Query i of L sits at position S - L + i: it sees S - L + i + 1 keys, never a later one."""
    q, k, v = qkv(3, seed=6)
    _, weights = grouped_query_attention(q, k, v, causal=True)
    for i in range(L):
        seen = S - L + i + 1
        assert (weights[..., i, seen:] == 0).all() and (weights[..., i, :seen] > 0).all()
    assert causal_mask(1, 4).tolist() == [[False] * 4]
    assert causal_mask(3, 3).tolist() == torch.ones(3, 3, dtype=torch.bool).triu(1).tolist()


def torch_stack(seed: int = 0) -> nn.TransformerEncoder:
    """torch's pre-norm stack with a final LayerNorm; every bias and LayerNorm parameter random."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(E, TORCH_HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=True, **f64)
    stack = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(E, **f64), enable_nested_tensor=False)
    with torch.no_grad():
        for p in stack.parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.5)
    return stack.eval()


@pytest.mark.parametrize("torch_path", ["fused", "step by step"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_decoder_is_torchs_encoder_with_a_causal_mask(need_weights, torch_path):
    theirs = torch_stack(seed=1)
    ours = Decoder.from_torch(theirs)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    x = torch.randn(N, S, E, generator=torch.Generator().manual_seed(2), **f64)
    causal = nn.Transformer.generate_square_subsequent_mask(S, **f64)
    expected = torch_run(lambda: theirs(x, mask=causal, is_causal=True), torch_path)
    got, weights = ours(x, need_weights=need_weights)
    assert_close(got, expected, **TOL)
    if need_weights:
        assert weights.shape == (N, LAYERS, TORCH_HEADS, S, S)
    with torch.no_grad():
        ours.layers[-1].linear2.bias[0] += 1e-6          # the comparison sees a small change
    assert not torch.allclose(ours(x)[0], expected, **TOL)


@pytest.mark.parametrize("torch_path", ["fused", "step by step"])
def test_decoder_copies_each_layer_norms_eps(torch_path):
    """eps is no parameter (state_dicts do not carry it): the layers' and the final norm's are copied apart."""
    torch.manual_seed(5)
    layer = nn.TransformerEncoderLayer(E, TORCH_HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=True,
                                       layer_norm_eps=1e-1, **f64)
    theirs = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E, eps=1e-3, **f64), enable_nested_tensor=False).eval()
    x = 0.05 * torch.randn(N, S, E, **f64)                # small inputs, so that eps matters
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)
    expected = torch_run(lambda: theirs(x, mask=mask, is_causal=True), torch_path)
    assert_close(Decoder.from_torch(theirs)(x)[0], expected, **TOL)


@pytest.mark.parametrize("torch_path", ["fused", "step by step"])
def test_attention_copied_from_torch_is_torchs_causal_attention(torch_path):
    torch.manual_seed(3)
    theirs = nn.MultiheadAttention(E, TORCH_HEADS, batch_first=True, **f64).eval()
    with torch.no_grad():
        theirs.in_proj_bias.normal_()
        theirs.out_proj.bias.normal_()
    ours = CausalSelfAttention.from_torch(theirs)
    x = torch.randn(N, S, E, **f64)
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)
    # torch's fast path returns no weights: they come from a second, step-by-step call
    expected = torch_run(lambda: theirs(x, x, x, attn_mask=mask, need_weights=False)[0], torch_path)
    _, expected_w = theirs(x, x, x, attn_mask=mask, average_attn_weights=False)
    for need_weights in (False, True):
        out, w = ours(x, need_weights=need_weights)
        assert_close(out, expected, **TOL)
    assert_close(w, expected_w, **TOL)


def test_encoder_block_copy_keeps_float64():
    """from_torch sets the dtype before copying: a float64 block is not rounded through float32."""
    layer = torch_stack(seed=4).layers[0]
    x = torch.randn(N, S, E, **f64)
    assert_close(EncoderBlock.from_torch(layer)(x)[0], layer(x), **TOL)


@pytest.mark.parametrize("g", [6, 2, 1])
@pytest.mark.parametrize("steps", [(1, 1, 1, 1, 1), (2, 1, 2), (5,)])
def test_cached_generation_is_the_full_recomputation(g, steps):
    """Positions fed in pieces (one at a time, or several) through a cache give the full pass."""
    torch.manual_seed(g)
    decoder = Decoder(LAYERS, E, H, D_FF, num_kv_heads=g).to(torch.float64).eval()
    x = torch.randn(N, sum(steps), E, **f64)
    full, _ = decoder(x)
    cache, pieces, start = decoder.new_cache(), [], 0
    for n in steps:
        pieces.append(decoder(x[:, start:start + n], cache, need_weights=n % 2 == 1)[0])
        start += n
        assert len(cache) == start
    assert_close(torch.cat(pieces, dim=1), full, **TOL)
    assert cache.numel() == counting.kv_cache_numbers(N, start, E, H, LAYERS, g)
    assert cache.layers[0].keys.shape == (N, g, start, E // H)


@pytest.mark.parametrize("g", [6, 3, 1])
def test_parameter_count_with_fewer_key_value_heads(g):
    layer = CausalSelfAttention(E, H, num_kv_heads=g)
    counts = counting.parameter_count(E, H, num_kv_heads=g)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert counts[name] == sum(p.numel() for p in getattr(layer, name).parameters()), name
    assert counts["total"] == sum(p.numel() for p in layer.parameters())
    assert counting.parameter_count(E, H, num_kv_heads=H) == counting.parameter_count(E, H)


@pytest.mark.parametrize("g,new_len,cached_len", [(6, 5, 0), (6, 1, 4), (2, 2, 3), (1, 1, 6)])
def test_decoder_macs_match_flop_counter_mode(g, new_len, cached_len):
    torch.manual_seed(7)
    decoder = Decoder(LAYERS, E, H, D_FF, num_kv_heads=g).eval()
    x = torch.randn(1, cached_len + new_len, E)
    cache = decoder.new_cache()
    if cached_len:
        decoder(x[:, :cached_len], cache)
    with FlopCounterMode(display=False) as counter:
        decoder(x[:, cached_len:], cache, need_weights=True)   # the explicit path: every product visible
    assert counter.get_total_flops() == 2 * counting.decoder_macs(1, new_len, cached_len, E, H, D_FF, LAYERS,
                                                                  g)["total"]


def test_self_attention_macs_without_cache_are_the_layers_macs():
    assert counting.self_attention_macs(3, 7, 0, 20, 4) == counting.macs(3, 7, 7, 20, 4)
    cached = counting.self_attention_macs(3, 1, 6, 20, 4, num_kv_heads=2)
    assert cached["k_proj"] == 3 * 1 * 20 * 10 and cached["scores"] == 3 * 4 * 1 * 7 * 5


q6, k2, v2 = qkv(2, seed=0)
CASES = {
    "kv heads do not divide the heads": (lambda: CausalSelfAttention(E, H, num_kv_heads=4),
        "num_kv_heads: expected a divisor of num_heads=6 (each key/value head serves the same number of "
        "query heads), got 4."),
    "zero kv heads": (lambda: counting.kv_cache_numbers(1, 8, E, H, 2, num_kv_heads=0),
        "num_kv_heads: expected a positive integer, got 0."),
    "more kv heads than heads": (lambda: counting.parameter_count(E, 3, num_kv_heads=6),
        "num_kv_heads: expected a divisor of num_heads=3 (each key/value head serves the same number of "
        "query heads), got 6."),
    "q without a head axis": (lambda: grouped_query_attention(q6[:, 0], k2, v2),
        "q: expected a 4-D tensor shaped (N, h, L, d_k), got a 3-D tensor of shape (2, 3, 4)."),
    "5 query heads over 2 key/value heads": (lambda: grouped_query_attention(q6[:, :5], k2, v2),
        "num_kv_heads: expected a divisor of num_heads=5 (each key/value head serves the same number of "
        "query heads), got 2."),
    "keys and queries of different width": (lambda: grouped_query_attention(q6, k2[..., :3], v2),
        "k.shape[-1]: expected q.shape[-1] (queries and keys share d_k) = 4, got 3."),
    "fewer values than keys": (lambda: grouped_query_attention(q6, k2, v2[:, :, :4]),
        "v.shape[:3]: expected k.shape[:3] (one value per key) = (2, 2, 5), got (2, 2, 4)."),
    "more causal queries than positions": (lambda: grouped_query_attention(q6, k2[:, :, :2], v2[:, :, :2], True),
        "q_len: expected at most kv_len = 2 (the queries are among the positions), got 3."),
    "post-norm stack": (lambda: Decoder.from_torch(nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, 3, D_FF, batch_first=True), 2, norm=nn.LayerNorm(E), enable_nested_tensor=False)),
        "encoder: expected an nn.TransformerEncoder of norm_first=True layers with a final nn.LayerNorm (pre-norm), "
        "got norm_first=False, norm=LayerNorm."),
    "no final norm": (lambda: Decoder.from_torch(nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, 3, D_FF, batch_first=True, norm_first=True), 2, enable_nested_tensor=False)),
        "encoder: expected an nn.TransformerEncoder of norm_first=True layers with a final nn.LayerNorm (pre-norm), "
        "got norm_first=True, norm=NoneType."),
    "cross-attention from torch": (lambda: CausalSelfAttention.from_torch(nn.MultiheadAttention(E, 3, kdim=5)),
        "mha: expected a self-attention nn.MultiheadAttention (kdim = vdim = embed_dim, no add_bias_kv / "
        "add_zero_attn), got kdim=5, vdim=12, add_bias_kv=False, add_zero_attn=False."),
    "unbatched input": (lambda: Decoder(1, E, H, D_FF)(torch.randn(S, E)),
        "x: expected a 3-D tensor shaped (N, L, d_model), batch first, got a 2-D tensor of shape (5, 12)."),
    "input of another width": (lambda: Decoder(1, E, H, D_FF)(torch.randn(N, S, E - 2)),
        "x: expected last dimension 12 (d_model), got shape (2, 5, 10)."),
    "attention input of another width": (lambda: CausalSelfAttention(E, H)(torch.randn(N, S, E + 1)),
        "x: expected last dimension 12 (embed_dim), got shape (2, 5, 13)."),
    "final norm not a LayerNorm": (lambda: Decoder.from_torch(nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, 3, D_FF, batch_first=True, norm_first=True), 2, norm=nn.RMSNorm(E),
        enable_nested_tensor=False)),
        "encoder: expected an nn.TransformerEncoder of norm_first=True layers with a final nn.LayerNorm (pre-norm), "
        "got norm_first=True, norm=RMSNorm."),
    "a cache of another depth": (lambda: Decoder(2, E, H, D_FF)(torch.randn(1, 2, E), KVCache(3)),
        "cache layers: expected the decoder's number of layers = 2, got 3."),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_misuse_is_explained(case):
    call, message = CASES[case]
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_a_cache_of_another_batch_is_refused():
    decoder, cache = Decoder(1, E, H, D_FF), KVCache(1)
    decoder(torch.randn(2, 3, E), cache)
    with pytest.raises(ValueError, match=re.escape("new keys' (N, g, d_k): expected the cached keys' (N, g, d_k) "
                                                   "= (2, 6, 2), got (1, 6, 2).")):
        decoder(torch.randn(1, 1, E), cache)
