"""Batched multi-head attention in PyTorch: the function of ``torch.nn.MultiheadAttention``.

The same ``forward`` signature and semantics (masks, dropout, ``batch_first``, unbatched inputs,
averaged or per-head weights) and the same initialisation, draw for draw. Not a drop-in: the
constructor has no ``add_bias_kv`` or ``add_zero_attn`` (so pass ``kdim``, ``vdim`` and
``batch_first`` by keyword: after ``bias`` the positions differ from torch's), and four plain
``nn.Linear`` layers replace the packed ``in_proj_weight``, so a torch ``state_dict`` loads through
:meth:`MultiHeadAttention.from_torch`, not ``load_state_dict``. When weights are not needed the
fused ``F.scaled_dot_product_attention`` runs; when they are, the explicit softmax(QK^T/sqrt(d_k))V.

Masks follow torch: a boolean ``attn_mask``/``key_padding_mask`` marks with ``True`` the pairs
that may NOT attend; a floating one is added to the scores. (The NumPy reference and
``F.scaled_dot_product_attention`` use the opposite boolean convention: True = may attend;
chapter 2, "Masks: two boolean conventions, five readers", compares the readers.)
One liberty: ``is_causal=True`` without ``attn_mask`` builds the causal mask instead of failing.
"""
import functools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import reference
from .checks import check_dropout, check_heads, check_rank, check_same, check_width, fail


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device=None, dtype=None):
        super().__init__()
        self.head_dim = check_heads(embed_dim, num_heads)
        check_dropout(dropout)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.batch_first = batch_first
        # skip_init: no random draws here, so that reset_parameters() draws exactly what torch draws
        factory = {"device": device or torch.get_default_device(), "dtype": dtype}
        linear = functools.partial(nn.utils.skip_init, nn.Linear, bias=bias, **factory)
        self.q_proj = linear(embed_dim, embed_dim)
        self.k_proj = linear(self.kdim, embed_dim)
        self.v_proj = linear(self.vdim, embed_dim)
        self.out_proj = linear(embed_dim, embed_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch.nn.MultiheadAttention's initialisation, draw for draw (same seed, same weights).

        ``out_proj.weight``: ``nn.Linear``'s default (Kaiming-uniform, bound 1/sqrt(E)).
        Input projections: Xavier-uniform of torch's *packed* (3E, E) ``in_proj_weight`` when
        kdim = vdim = E, so the bound is sqrt(6 / (E + 3E)) = sqrt(6 / (4E)), not the
        sqrt(6 / (2E)) of a separate (E, E) matrix; with other kdim/vdim, each (E, kdim|vdim)
        matrix separately, as torch does. All biases start at zero.
        """
        self.out_proj.reset_parameters()  # torch's out_proj is built (and drawn) first
        qkv = (self.q_proj, self.k_proj, self.v_proj)
        with torch.no_grad():
            if self.kdim == self.vdim == self.embed_dim:
                w = self.q_proj.weight
                packed = torch.empty(3 * self.embed_dim, self.embed_dim, device=w.device, dtype=w.dtype)
                nn.init.xavier_uniform_(packed)  # (3E, E), like torch's in_proj_weight
                for proj, block in zip(qkv, packed.chunk(3)):
                    proj.weight.copy_(block)
            else:
                for proj in qkv:
                    nn.init.xavier_uniform_(proj.weight)
            for proj in (*qkv, self.out_proj):
                if proj.bias is not None:
                    nn.init.zeros_(proj.bias)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Inputs (L, N, E) / (S, N, kdim) / (S, N, vdim), or (N, ·, ·) with batch_first, or unbatched.

        Returns the output shaped like ``query`` and, if ``need_weights``, the attention
        weights (N, L, S) averaged over heads or (N, h, L, S) per head (no N when unbatched).
        """
        batched = self._check_inputs(query, key, value)
        query, key, value = (self._batch_first(x, batched) for x in (query, key, value))
        n, tgt_len, src_len = query.shape[0], query.shape[1], key.shape[1]
        mask = self._additive_mask(attn_mask, key_padding_mask, is_causal, batched, n, tgt_len, src_len,
                                   query.dtype)

        q = self._split_heads(self.q_proj(query))  # (N, h, L, d_k)
        k = self._split_heads(self.k_proj(key))    # (N, h, S, d_k)
        v = self._split_heads(self.v_proj(value))  # (N, h, S, d_v)
        p = self.dropout if self.training else 0.0
        if need_weights:
            heads, weights = self._explicit_attention(q, k, v, mask, p)
        else:
            causal_only = is_causal and key_padding_mask is None
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal_only else mask,
                                                   dropout_p=p, is_causal=causal_only)
            weights = None
        out = self.out_proj(heads.transpose(1, 2).reshape(n, tgt_len, self.embed_dim))  # (N, L, E)

        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (N, L, S)
        if not batched:
            return out.squeeze(0), None if weights is None else weights.squeeze(0)
        return (out if self.batch_first else out.transpose(0, 1)), weights

    def _split_heads(self, x: Tensor) -> Tensor:
        n, t, _ = x.shape
        return x.view(n, t, self.num_heads, self.head_dim).transpose(1, 2)  # (N, T, E) -> (N, h, T, d_k)

    def _explicit_attention(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                            p: float) -> tuple[Tensor, Tensor]:
        scores = (q * (1.0 / math.sqrt(self.head_dim))) @ k.transpose(-2, -1)  # (N, h, L, S)
        if mask is not None:
            scores = scores + mask
        weights = torch.softmax(scores, dim=-1)
        if p > 0:
            weights = F.dropout(weights, p=p)  # attention dropout acts on the weights, as in torch
        return weights @ v, weights            # (N, h, L, d_v)

    def _batch_first(self, x: Tensor, batched: bool) -> Tensor:
        if not batched:
            return x.unsqueeze(0)  # (T, E) -> (1, T, E)
        return x if self.batch_first else x.transpose(0, 1)  # (T, N, E) -> (N, T, E)

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> bool:
        layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
        check_rank("query", query.shape, (2, 3), f"{layout}, or (L, E) unbatched")
        check_same("key.dim()", key.dim(), query.dim(), "query.dim() (key and query both batched or both not)")
        check_same("value.dim()", value.dim(), query.dim(), "query.dim() (value and query both batched or both not)")
        check_width("query", query.shape, self.embed_dim, "embed_dim")
        check_width("key", key.shape, self.kdim, "kdim")
        check_width("value", value.shape, self.vdim, "vdim")
        seq, batch = (1, 0) if self.batch_first else (0, 1)
        if query.dim() == 2:
            seq = 0
        check_same("value length", value.shape[seq], key.shape[seq], "key length (one value per key)")
        if query.dim() == 3:
            check_same("key batch size", key.shape[batch], query.shape[batch], "query batch size")
            check_same("value batch size", value.shape[batch], query.shape[batch], "query batch size")
        return query.dim() == 3

    def _additive_mask(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool,
                       batched: bool, n: int, tgt_len: int, src_len: int, dtype) -> Tensor | None:
        """Merge attn_mask and key_padding_mask into one additive mask broadcasting to (N, h, L, S)."""
        if is_causal and attn_mask is None:
            attn_mask = ~torch.ones(tgt_len, src_len, dtype=torch.bool, device=self.q_proj.weight.device).tril()
        mask = None
        if attn_mask is not None:
            mask = _as_additive("attn_mask", attn_mask, dtype)
            if attn_mask.dim() == 2:
                check_same("attn_mask.shape", tuple(attn_mask.shape), (tgt_len, src_len), "(L, S)")
                mask = mask.view(1, 1, tgt_len, src_len)
            elif attn_mask.dim() == 3:
                check_same("attn_mask.shape", tuple(attn_mask.shape), (n * self.num_heads, tgt_len, src_len),
                           "(N*num_heads, L, S) for a 3-D mask")
                mask = mask.view(n, self.num_heads, tgt_len, src_len)
            else:
                fail("attn_mask", "a 2-D (L, S) or 3-D (N*num_heads, L, S) mask", f"shape {tuple(attn_mask.shape)}")
        if key_padding_mask is not None:
            expected = (n, src_len) if batched else (src_len,)
            check_same("key_padding_mask.shape", tuple(key_padding_mask.shape), expected,
                       "(N, S)" if batched else "(S,) for unbatched input")
            padding = _as_additive("key_padding_mask", key_padding_mask, dtype).view(n, 1, 1, src_len)
            mask = padding if mask is None else mask + padding
        return mask

    # --- moving weights to and from torch.nn.MultiheadAttention and the NumPy reference ---

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """A copy of ``mha`` (same configuration, same weights, same train/eval mode)."""
        if mha.bias_k is not None or mha.add_zero_attn:
            fail("mha", "a MultiheadAttention without add_bias_kv / add_zero_attn (not part of this course)",
                 f"add_bias_kv={mha.bias_k is not None}, add_zero_attn={mha.add_zero_attn}")
        ref = mha.out_proj.weight
        new = cls(mha.embed_dim, mha.num_heads, mha.dropout, bias=mha.in_proj_bias is not None, kdim=mha.kdim,
                  vdim=mha.vdim, batch_first=mha.batch_first, device=ref.device, dtype=ref.dtype)
        new.load_state_dict(_to_ours(mha.state_dict(), mha._qkv_same_embed_dim))
        return new.train(mha.training)

    def to_torch(self) -> nn.MultiheadAttention:
        """The same layer as a ``torch.nn.MultiheadAttention``."""
        ref = self.out_proj.weight
        mha = nn.MultiheadAttention(self.embed_dim, self.num_heads, self.dropout, bias=self.q_proj.bias is not None,
                                    kdim=self.kdim, vdim=self.vdim, batch_first=self.batch_first,
                                    device=ref.device, dtype=ref.dtype)
        mha.load_state_dict(_to_torch(self.state_dict(), mha._qkv_same_embed_dim))
        return mha.train(self.training)

    def reference_params(self) -> reference.MHAParams:
        """The weights as NumPy arrays in the equations' orientation (W acting on the right)."""
        def arr(t):
            return None if t is None else t.detach().cpu().numpy().astype(np.float64)
        w = {name: arr(getattr(self, f"{name}_proj").weight).T for name in ("q", "k", "v", "out")}
        b = {name: arr(getattr(self, f"{name}_proj").bias) for name in ("q", "k", "v", "out")}
        return reference.MHAParams(self.num_heads, w["q"], w["k"], w["v"], w["out"],
                                   b["q"], b["k"], b["v"], b["out"])


def _as_additive(name: str, mask: Tensor, dtype) -> Tensor:
    """torch's mask convention -> additive: bool True (blocked) becomes -inf, floats pass through."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask, float("-inf"))
    if not torch.is_floating_point(mask):
        fail(name, "a bool (True = blocked) or floating (additive) tensor", f"dtype {mask.dtype}")
    return mask.to(dtype)


_PROJ = ("q", "k", "v")


def _to_ours(state: dict, packed: bool) -> dict:
    """Rename a torch MHA state dict (packed or separate in-projection) into our four Linears."""
    weights = state["in_proj_weight"].chunk(3) if packed else [state[f"{p}_proj_weight"] for p in _PROJ]
    out = {f"{p}_proj.weight": w for p, w in zip(_PROJ, weights)}
    if state.get("in_proj_bias") is not None:
        out.update({f"{p}_proj.bias": b for p, b in zip(_PROJ, state["in_proj_bias"].chunk(3))})
    out.update({k: v for k, v in state.items() if k.startswith("out_proj.")})
    return out


def _to_torch(state: dict, packed: bool) -> dict:
    """The inverse of :func:`_to_ours`."""
    weights = [state[f"{p}_proj.weight"] for p in _PROJ]
    out = {"in_proj_weight": torch.cat(weights)} if packed else {
        f"{p}_proj_weight": w for p, w in zip(_PROJ, weights)}
    if "q_proj.bias" in state:
        out["in_proj_bias"] = torch.cat([state[f"{p}_proj.bias"] for p in _PROJ])
    out.update({k: v for k, v in state.items() if k.startswith("out_proj.")})
    return out
