"""mha_lib.block: the encoder block computes what torch.nn.TransformerEncoderLayer computes.

Chapter 6 loads torch's block into ``EncoderBlock.from_torch`` and compares; these tests repeat
that in both orders, with masks and padding, in eval and training mode (dropout off), and check
the positional encoding against its formula. Sizes all differ (N=2, T=5, d=12, h=3, d_ff=20).
"""
import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from mha_lib.block import EncoderBlock, positional_encoding

N, T, D, H, D_FF = 2, 5, 12, 3, 20


def torch_block(norm_first: bool, seed: int = 0) -> nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for p in layer.parameters():
            if p.dim() == 1:                 # biases and LayerNorm parameters: not their defaults
                p.normal_(0.0, 0.5)
    return layer


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_matches_torch_with_masks(norm_first, training):
    theirs = torch_block(norm_first, seed=3).train(training)
    ours = EncoderBlock.from_torch(theirs)
    assert ours.training == training
    x = torch.randn(N, T, D, generator=torch.Generator().manual_seed(1))
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)             # True = blocked
    padding = torch.tensor([[False] * T, [False] * 3 + [True] * 2])  # example 2: 2 padded keys
    for mask, pad in ((None, None), (causal, None), (None, padding), (causal, padding)):
        with torch.no_grad():
            expected = theirs(x, src_mask=mask, src_key_padding_mask=pad)
            got, _ = ours(x, attn_mask=mask, key_padding_mask=pad)
        assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_changed_weight_is_detected():
    theirs = torch_block(norm_first=False).eval()
    ours = EncoderBlock.from_torch(theirs)
    with torch.no_grad():
        ours.linear1.weight[0, 0] += 1e-2
    x = torch.randn(N, T, D)
    with torch.no_grad(), pytest.raises(AssertionError):
        assert_close(ours(x)[0], theirs(x), rtol=1e-5, atol=1e-5)


def test_weights_and_shapes():
    block = EncoderBlock(D, H, D_FF)
    x = torch.randn(N, T, D)
    y, w = block(x, need_weights=True)
    assert y.shape == (N, T, D) and w.shape == (N, H, T, T)
    assert_close(w.sum(-1), torch.ones(N, H, T))
    assert block(x)[1] is None


def test_gelu_is_refused():
    layer = nn.TransformerEncoderLayer(D, H, D_FF, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match="relu"):
        EncoderBlock.from_torch(layer)


def test_no_bias_is_refused():
    layer = nn.TransformerEncoderLayer(D, H, D_FF, bias=False, batch_first=True)
    with pytest.raises(ValueError, match="bias=True"):
        EncoderBlock.from_torch(layer)


def test_positional_encoding_formula():
    pe = positional_encoding(7, 6)
    assert pe.shape == (7, 6)
    for t in range(7):
        for i in range(3):
            angle = t / 10000 ** (2 * i / 6)
            assert math.isclose(pe[t, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[t, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)
    with pytest.raises(ValueError, match="even"):
        positional_encoding(4, 5)
