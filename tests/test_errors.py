"""Every misuse raises ValueError saying what was expected and what was given (exact wording pinned)."""
import re

import numpy as np
import pytest
import torch

from mha_lib import MultiHeadAttention, counting, reference as R

E, H = 12, 3
mha = MultiHeadAttention(E, H, kdim=5, vdim=7, batch_first=True)
q, k, v = torch.randn(2, 4, E), torch.randn(2, 6, 5), torch.randn(2, 6, 7)
x = np.ones((2, 3, E))

CASES = {
    "heads do not divide the width": (lambda: MultiHeadAttention(10, 3),
        "embed_dim: expected a multiple of num_heads=3 so every head gets the same width, "
        "got embed_dim=10 (remainder 1)."),
    "zero heads": (lambda: counting.parameter_count(8, 0), "num_heads: expected a positive integer, got 0."),
    "dropout out of range": (lambda: MultiHeadAttention(E, H, dropout=1.5),
        "dropout: expected a probability in [0, 1), got 1.5."),
    "query of rank 4": (lambda: mha(q[None], k, v),
        "query: expected a 2-D or 3-D tensor shaped (N, L, E), or (L, E) unbatched, "
        "got a 4-D tensor of shape (1, 2, 4, 12)."),
    "batched query, unbatched key": (lambda: mha(q, k[0], v),
        "key.dim(): expected query.dim() (key and query both batched or both not) = 3, got 2."),
    "query width": (lambda: mha(q[..., :8], k, v),
        "query: expected last dimension 12 (embed_dim), got shape (2, 4, 8)."),
    "key width": (lambda: mha(q, v, v), "key: expected last dimension 5 (kdim), got shape (2, 6, 7)."),
    "value width": (lambda: mha(q, k, k), "value: expected last dimension 7 (vdim), got shape (2, 6, 5)."),
    "key and value lengths": (lambda: mha(q, k, v[:, :5]),
        "value length: expected key length (one value per key) = 6, got 5."),
    "batch sizes": (lambda: mha(q, k[:1], v[:1]), "key batch size: expected query batch size = 2, got 1."),
    "2-D mask shape": (lambda: mha(q, k, v, attn_mask=torch.zeros(6, 4, dtype=torch.bool)),
        "attn_mask.shape: expected (L, S) = (4, 6), got (6, 4)."),
    "3-D mask shape": (lambda: mha(q, k, v, attn_mask=torch.zeros(2, 4, 6)),
        "attn_mask.shape: expected (N*num_heads, L, S) for a 3-D mask = (6, 4, 6), got (2, 4, 6)."),
    "mask rank": (lambda: mha(q, k, v, attn_mask=torch.zeros(4)),
        "attn_mask: expected a 2-D (L, S) or 3-D (N*num_heads, L, S) mask, got shape (4,)."),
    "mask dtype": (lambda: mha(q, k, v, attn_mask=torch.zeros(4, 6, dtype=torch.int64)),
        "attn_mask: expected a bool (True = blocked) or floating (additive) tensor, got dtype torch.int64."),
    "padding mask shape": (lambda: mha(q, k, v, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)),
        "key_padding_mask.shape: expected (N, S) = (2, 6), got (2, 4)."),
    "padding mask dtype": (lambda: mha(q, k, v, key_padding_mask=torch.zeros(2, 6, dtype=torch.int32)),
        "key_padding_mask: expected a bool (True = blocked) or floating (additive) tensor, got dtype torch.int32."),
    "reference: projection width": (lambda: R.project(x, np.ones((5, 4))),
        "x: expected last dimension 5 (must equal d_in, the first dimension of w), got shape (2, 3, 12)."),
    "reference: bias shape": (lambda: R.project(x, np.ones((E, 4)), np.ones(5)),
        "b.shape: expected (d_out,) to match w = (4,), got (5,)."),
    "reference: split into uneven heads": (lambda: R.split_heads(x, 5),
        "embed_dim: expected a multiple of num_heads=5 so every head gets the same width, "
        "got embed_dim=12 (remainder 2)."),
    "reference: merge a 2-D array": (lambda: R.merge_heads(x[0]),
        "x: expected a 3-D or 4-D tensor shaped (h, T, d_v) or (B, h, T, d_v), got a 2-D tensor of shape (3, 12)."),
    "reference: queries and keys of different width": (lambda: R.scaled_dot_product_attention(x, x[..., :4], x),
        "k.shape[-1]: expected q.shape[-1] (queries and keys share d_k) = 12, got 4."),
    "reference: mask that does not fit": (lambda: R.scaled_dot_product_attention(x, x, x, np.ones((2, 2), bool)),
        "mask.shape: expected a shape that broadcasts to the scores (2, 3, 3) (..., T_q, T_k), got (2, 2)."),
    "reference: integer mask": (lambda: R.scaled_dot_product_attention(x, x, x, np.ones((3, 3), int)),
        "mask: expected a boolean (True = may attend) or floating (additive) array, got dtype int64."),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_misuse_is_explained(case):
    call, message = CASES[case]
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_unbatched_padding_mask_names_its_shape():
    with pytest.raises(ValueError, match=re.escape("key_padding_mask.shape: expected (S,) for unbatched input")):
        mha(q[0], k[0], v[0], key_padding_mask=torch.zeros(2, 6, dtype=torch.bool))
