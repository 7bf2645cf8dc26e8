"""A Transformer encoder block around :class:`mha_lib.MultiHeadAttention`, and positional encoding.

The block is the layer at work inside a model (chapter 6)::

    post-norm (norm_first=False):  x = LN_1(x + SelfAttn(x));   x = LN_2(x + FFN(x))
    pre-norm  (norm_first=True):   x = x + SelfAttn(LN_1(x));   x = x + FFN(LN_2(x))
    FFN(x) = ReLU(x W_1 + b_1) W_2 + b_2        (applied to every position alike)

Its sub-modules carry the names of ``torch.nn.TransformerEncoderLayer`` (``self_attn``,
``linear1``, ``linear2``, ``norm1``, ``norm2``), but torch's ``state_dict`` does not load as
it is (torch packs the attention's input projections in one ``in_proj_weight``):
:meth:`EncoderBlock.from_torch` copies one, and the two compute the same function. Dropout sits
where torch puts it (after the attention, inside the FFN, after the FFN), and in the attention
weights. Unlike torch's layer, the block defaults to ``batch_first=True`` and ``dropout=0.0``, and
``dim_feedforward`` has no default.
"""
import math

import torch
from torch import Tensor, nn

from .checks import check_dropout, fail
from .module import MultiHeadAttention


def positional_encoding(seq_len: int, d_model: int) -> Tensor:
    """The sinusoids of "Attention Is All You Need": (seq_len, d_model).

    PE[t, 2i] = sin(t / 10000^(2i / d_model)),  PE[t, 2i + 1] = cos(t / 10000^(2i / d_model)).
    """
    if d_model % 2:
        fail("d_model", "an even width (sine and cosine come in pairs)", d_model)
    t = torch.arange(seq_len, dtype=torch.float32)[:, None]              # (T, 1)
    rate = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)  # (d/2,)
    angle = t * rate                                                       # (T, d/2)
    pairs = torch.stack([angle.sin(), angle.cos()], dim=-1)               # (T, d/2, 2)
    return pairs.view(seq_len, d_model)                 # (T, d): sin at even, cos at odd features


class EncoderBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each with a residual and LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, dim_feedforward: int, dropout: float = 0.0,
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, batch_first: bool = True):
        super().__init__()
        check_dropout(dropout)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, batch_first=batch_first)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, key_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (N, T, d_model) with batch_first, else (T, N, d_model) -> same shape, and per-head
        attention weights (N, h, T, T) if ``need_weights``. Masks as in MultiHeadAttention."""
        if self.norm_first:
            attended, weights = self._attend(self.norm1(x), attn_mask, key_padding_mask, need_weights)
            x = x + attended
            return x + self._feed_forward(self.norm2(x)), weights
        attended, weights = self._attend(x, attn_mask, key_padding_mask, need_weights)
        x = self.norm1(x + attended)
        return self.norm2(x + self._feed_forward(x)), weights

    def _attend(self, x, attn_mask, key_padding_mask, need_weights):
        out, weights = self.self_attn(x, x, x, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                                      need_weights=need_weights, average_attn_weights=False)
        return self.dropout(out), weights                       # out like x, weights (N, h, T, T)

    def _feed_forward(self, x: Tensor) -> Tensor:
        hidden = self.dropout(torch.relu(self.linear1(x)))     # (..., T, dim_feedforward)
        return self.dropout(self.linear2(hidden))              # (..., T, d_model)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "EncoderBlock":
        """A copy of ``layer`` (same configuration, weights and train/eval mode); ReLU and biases only."""
        if layer.activation_relu_or_gelu != 1:
            fail("layer", "a TransformerEncoderLayer with activation='relu'", f"activation {layer.activation}")
        if layer.linear1.bias is None:
            fail("layer", "a TransformerEncoderLayer with bias=True", "one built with bias=False")
        attn = layer.self_attn
        ref = layer.linear1.weight       # the copy gets its device and dtype before the weights arrive
        new = cls(attn.embed_dim, attn.num_heads, layer.linear1.out_features, attn.dropout,
                  norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
                  batch_first=attn.batch_first).to(ref.device, ref.dtype)
        new.self_attn = MultiHeadAttention.from_torch(attn)
        for name in ("linear1", "linear2", "norm1", "norm2"):
            getattr(new, name).load_state_dict(getattr(layer, name).state_dict())
        return new.train(layer.training)
