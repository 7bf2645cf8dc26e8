"""Attention in a decoder (chapter 7): grouped-query causal self-attention, pre-norm blocks, a KV cache.

* :func:`grouped_query_attention`: softmax(Q K^T / sqrt(d_k)) V where h query heads share g
  key/value heads (g divides h; query head i reads key/value head i // (h/g)). g = h is ordinary
  multi-head attention, g = 1 multi-query attention (Shazeer 2019), 1 < g < h grouped-query
  attention (Ainslie et al. 2023). It is ``F.scaled_dot_product_attention(..., enable_gqa=True)``.
* :class:`CausalSelfAttention`: the layer around it (W^Q is E x E; W^K and W^V are E x g d_k).
* :class:`DecoderBlock` and :class:`Decoder`: pre-norm blocks with a causal mask, then the final
  LayerNorm, under the names of ``torch.nn.TransformerEncoder`` (``layers``, ``norm``), so
  :meth:`Decoder.from_torch` copies one::

      x = x + SelfAttn(LN_1(x));   x = x + FFN(LN_2(x))      (each block)
      y = LN(x)                                            (after the last block)

* :class:`KVCache`: each layer's keys and values of the positions seen so far. Given a cache, a
  forward pass takes only the new positions: it projects them, appends their keys and values,
  and lets their queries attend over everything cached. The result is the full recomputation's,
  for a fraction of the work (:func:`mha_lib.counting.decoder_macs`).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .block import EncoderBlock
from .checks import check_heads, check_kv_heads, check_rank, check_same, check_width, fail
from .module import _to_ours


def causal_mask(q_len: int, kv_len: int, device=None) -> Tensor:
    """(q_len, kv_len) bool, True = blocked: the queries are the last q_len of kv_len positions,
    and query i (at position kv_len - q_len + i) may see keys up to its own position."""
    if q_len > kv_len:
        fail("q_len", f"at most kv_len = {kv_len} (the queries are among the positions)", q_len)
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).triu(kv_len - q_len + 1)


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> int:
    """Shapes of grouped-query attention; returns h / g, the query heads per key/value head."""
    for name, t, layout in (("q", q, "(N, h, L, d_k)"), ("k", k, "(N, g, S, d_k)"), ("v", v, "(N, g, S, d_v)")):
        check_rank(name, t.shape, (4,), layout)
    check_same("k.shape[0]", k.shape[0], q.shape[0], "q.shape[0] (batch size)")
    check_same("v.shape[:3]", tuple(v.shape[:3]), tuple(k.shape[:3]), "k.shape[:3] (one value per key)")
    check_same("k.shape[-1]", k.shape[-1], q.shape[-1], "q.shape[-1] (queries and keys share d_k)")
    return check_kv_heads(q.shape[1], k.shape[1])


def grouped_query_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention with g key/value heads for h query heads.

    q (N, h, L, d_k), k (N, g, S, d_k), v (N, g, S, d_v) -> out (N, h, L, d_v), weights (N, h, L, S).
    The r = h/g query heads of a group are stacked along the query axis, so each group does one
    product with its own keys: no key or value is repeated, and the FLOPs are those of h heads.
    ``causal``: the L queries are the last L of the S positions (see :func:`causal_mask`).
    """
    r = _check_qkv(q, k, v)
    n, h, q_len, d_k = q.shape
    g, kv_len = k.shape[1], k.shape[2]
    grouped = q.reshape(n, g, r * q_len, d_k)                          # (N, g, r*L, d_k): a group's queries
    scores = (grouped * (1.0 / math.sqrt(d_k))) @ k.transpose(-2, -1)  # (N, g, r*L, S)
    scores = scores.view(n, h, q_len, kv_len)                          # (N, h, L, S)
    if causal:
        scores = scores.masked_fill(causal_mask(q_len, kv_len, q.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)                            # (N, h, L, S)
    out = weights.view(n, g, r * q_len, kv_len) @ v                    # (N, g, r*L, d_v)
    return out.view(n, h, q_len, v.shape[-1]), weights                 # (N, h, L, d_v)


class LayerCache:
    """One layer's keys and values so far, (N, g, T, d_k) each (None before the first step)."""

    def __init__(self):
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' keys and values (N, g, L, d_k); return all of them (N, g, T + L, d_k)."""
        if self.keys is not None:
            check_same("new keys' (N, g, d_k)", (keys.shape[0], keys.shape[1], keys.shape[3]),
                       (self.keys.shape[0], self.keys.shape[1], self.keys.shape[3]), "the cached keys' (N, g, d_k)")
            keys, values = torch.cat([self.keys, keys], dim=2), torch.cat([self.values, values], dim=2)
        self.keys, self.values = keys, values
        return keys, values


class KVCache:
    """The keys and values of every layer of a :class:`Decoder` (2 * layers * N * T * g * d_k numbers).

    Each step allocates the grown tensors anew (``torch.cat``); servers preallocate, or page, the
    memory instead, which changes the bookkeeping, not the numbers kept.
    """

    def __init__(self, num_layers: int):
        self.layers = [LayerCache() for _ in range(num_layers)]

    def __len__(self) -> int:
        """Positions cached so far."""
        return len(self.layers[0])

    def numel(self) -> int:
        """How many numbers the cache holds."""
        return sum(c.keys.numel() + c.values.numel() for c in self.layers if c.keys is not None)


class CausalSelfAttention(nn.Module):
    """Causal self-attention with ``num_kv_heads`` key/value heads (default: ``num_heads``, i.e. MHA).

    Parameters as in :class:`mha_lib.MultiHeadAttention` (``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``), with ``k_proj`` and ``v_proj`` mapping E to g * d_k instead of E.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None, bias: bool = True):
        super().__init__()
        self.head_dim = check_heads(embed_dim, num_heads)
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_kv_heads(num_heads, self.num_kv_heads)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        kv_width = self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, kv_width, bias=bias)
        self.v_proj = nn.Linear(embed_dim, kv_width, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, x: Tensor, cache: LayerCache | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (N, L, E) -> (N, L, E), and the weights (N, h, L, S) if ``need_weights``.

        Without a cache S = L. With one, x holds the L positions that follow the cached ones, and
        S = cached + L: the new keys and values join the cache.
        """
        check_rank("x", x.shape, (3,), "(N, L, E), batch first")
        check_width("x", x.shape, self.embed_dim, "embed_dim")
        n, q_len, _ = x.shape
        q = self._split(self.q_proj(x), self.num_heads)          # (N, h, L, d_k)
        k = self._split(self.k_proj(x), self.num_kv_heads)       # (N, g, L, d_k)
        v = self._split(self.v_proj(x), self.num_kv_heads)       # (N, g, L, d_k)
        if cache is not None:
            k, v = cache.append(k, v)                            # (N, g, S, d_k)
        if need_weights:                                         # the readable path
            heads, weights = grouped_query_attention(q, k, v, causal=True)
        else:                                                    # the fused kernel, same function
            mask = None if q_len == 1 else ~causal_mask(q_len, k.shape[2], x.device)  # True = may attend
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            weights = None
        concat = heads.transpose(1, 2).reshape(n, q_len, self.embed_dim)  # (N, h, L, d_k) -> (N, L, E)
        return self.out_proj(concat), weights

    def _split(self, x: Tensor, heads: int) -> Tensor:
        n, t, _ = x.shape
        return x.view(n, t, heads, self.head_dim).transpose(1, 2)  # (N, T, heads*d_k) -> (N, heads, T, d_k)

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> "CausalSelfAttention":
        """A copy of a self-attention ``nn.MultiheadAttention`` (so g = h); the copy takes batch-first input."""
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            fail("mha", "a self-attention nn.MultiheadAttention (kdim = vdim = embed_dim, no add_bias_kv / "
                 "add_zero_attn)", f"kdim={mha.kdim}, vdim={mha.vdim}, add_bias_kv={mha.bias_k is not None}, "
                 f"add_zero_attn={mha.add_zero_attn}")
        ref = mha.out_proj.weight
        new = cls(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None).to(ref.device, ref.dtype)
        new.load_state_dict(_to_ours(mha.state_dict(), packed=True))
        return new


class DecoderBlock(EncoderBlock):
    """Chapter 6's block, pre-norm, with causal (grouped-query) self-attention that can use a cache."""

    def __init__(self, d_model: int, num_heads: int, dim_feedforward: int, num_kv_heads: int | None = None,
                 layer_norm_eps: float = 1e-5):
        super().__init__(d_model, num_heads, dim_feedforward, norm_first=True, layer_norm_eps=layer_norm_eps)
        self.self_attn = CausalSelfAttention(d_model, num_heads, num_kv_heads)   # in place of the inherited MHA

    def forward(self, x: Tensor, cache: LayerCache | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (N, L, d_model) -> same shape, and the weights (N, h, L, S) if ``need_weights``."""
        attended, weights = self.self_attn(self.norm1(x), cache, need_weights)
        x = x + attended
        return x + self._feed_forward(self.norm2(x)), weights


class Decoder(nn.Module):
    """Pre-norm causal blocks, then the final LayerNorm: (N, T, d_model) -> (N, T, d_model)."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, dim_feedforward: int,
                 num_kv_heads: int | None = None, layer_norm_eps: float = 1e-5):
        super().__init__()
        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, dim_feedforward, num_kv_heads, layer_norm_eps)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def new_cache(self) -> KVCache:
        return KVCache(len(self.layers))

    def forward(self, x: Tensor, cache: KVCache | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (N, L, d_model) -> (N, L, d_model), and every layer's weights (N, layers, h, L, S) if
        ``need_weights``. With a cache, x holds the L positions after the cached ones."""
        check_rank("x", x.shape, (3,), "(N, L, d_model), batch first")
        check_width("x", x.shape, self.norm.normalized_shape[0], "d_model")
        if cache is not None:
            check_same("cache layers", len(cache.layers), len(self.layers), "the decoder's number of layers")
        weights = []
        for i, layer in enumerate(self.layers):
            x, w = layer(x, None if cache is None else cache.layers[i], need_weights)
            weights.append(w)
        return self.norm(x), torch.stack(weights, dim=1) if need_weights else None

    @classmethod
    def from_torch(cls, encoder: nn.TransformerEncoder) -> "Decoder":
        """A copy of an ``nn.TransformerEncoder`` of pre-norm ReLU layers with a final ``norm``, which
        computes this decoder when given the causal mask. Dropout is not copied (the decoder has
        none): the two agree in eval mode, or with dropout 0."""
        first, norm = encoder.layers[0], encoder.norm
        if not isinstance(norm, nn.LayerNorm) or not all(layer.norm_first for layer in encoder.layers):
            fail("encoder", "an nn.TransformerEncoder of norm_first=True layers with a final nn.LayerNorm (pre-norm)",
                 f"norm_first={first.norm_first}, norm={type(norm).__name__}")
        if norm.bias is None:
            fail("encoder.norm", "a LayerNorm with a weight and a bias", "one without")
        attn = first.self_attn
        ref = first.linear1.weight
        new = cls(len(encoder.layers), attn.embed_dim, attn.num_heads, first.linear1.out_features,
                  layer_norm_eps=norm.eps).to(ref.device, ref.dtype)
        for ours, theirs in zip(new.layers, encoder.layers):   # the same parameter names (g = h)
            ours.load_state_dict(EncoderBlock.from_torch(theirs).state_dict())  # checks ReLU and biases
            ours.norm1.eps, ours.norm2.eps = theirs.norm1.eps, theirs.norm2.eps  # not in a state_dict
        new.norm.load_state_dict(norm.state_dict())
        return new.train(encoder.training)
