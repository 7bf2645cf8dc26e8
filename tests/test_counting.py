"""Parameter and FLOP counts agree with torch's own modules and with FlopCounterMode."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from mha_lib import MultiHeadAttention, counting


@pytest.mark.parametrize("embed_dim,heads,bias,kdim,vdim", [(512, 8, True, None, None), (512, 8, False, None, None),
                                                            (12, 3, True, 5, 7), (12, 4, False, 20, 3)])
def test_parameter_count_matches_torch(embed_dim, heads, bias, kdim, vdim):
    theirs = torch.nn.MultiheadAttention(embed_dim, heads, bias=bias, kdim=kdim, vdim=vdim)
    ours = MultiHeadAttention(embed_dim, heads, bias=bias, kdim=kdim, vdim=vdim)
    counts = counting.parameter_count(embed_dim, heads, bias, kdim, vdim)
    assert counts["total"] == sum(p.numel() for p in theirs.parameters()) == sum(p.numel() for p in ours.parameters())
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert counts[name] == sum(p.numel() for p in getattr(ours, name).parameters())


def test_head_count_does_not_change_parameters():
    assert {counting.parameter_count(512, h)["total"] for h in (1, 2, 8, 64)} == {4 * 512 * 512 + 4 * 512}


@pytest.mark.parametrize("b,l,s,e,h,kdim,vdim", [(2, 4, 6, 12, 3, 5, 7), (3, 7, 7, 20, 4, None, None),
                                                 (1, 5, 2, 6, 6, 11, None)])
def test_matmul_flops_match_flop_counter_mode(b, l, s, e, h, kdim, vdim):
    module = MultiHeadAttention(e, h, kdim=kdim, vdim=vdim, batch_first=True)
    q, k, v = torch.randn(b, l, e), torch.randn(b, s, kdim or e), torch.randn(b, s, vdim or e)
    with FlopCounterMode(display=False) as counter:
        module(q, k, v, need_weights=True)  # the explicit path: every product is a visible mm/bmm
    by_module = counter.get_flop_counts()
    macs = counting.macs(b, l, s, e, h, kdim, vdim)
    for term in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert sum(by_module[f"MultiHeadAttention.{term}"].values()) == 2 * macs[term]
    assert by_module["Global"][torch.ops.aten.bmm] == 2 * (macs["scores"] + macs["weighted_sum"])
    assert counter.get_total_flops() == 2 * macs["total"]


def test_flops_add_elementwise_work_on_top_of_matmuls():
    f, m = counting.flops(2, 4, 6, 12, 3, bias=True), counting.macs(2, 4, 6, 12, 3)
    scores = 2 * 3 * 4 * 6
    assert f["softmax"] == counting.SOFTMAX_FLOPS_PER_SCORE * scores
    assert f["scores"] == 2 * m["scores"] + scores
    assert f["q_proj"] == 2 * m["q_proj"] + 2 * 4 * 12
    assert f["total"] == sum(v for k, v in f.items() if k != "total")


def test_heads_leave_matmul_flops_unchanged_but_not_softmax():
    one, eight = counting.flops(1, 128, 128, 512, 1), counting.flops(1, 128, 128, 512, 8)
    assert one["scores"] - 128 * 128 == eight["scores"] - 8 * 128 * 128
    assert eight["softmax"] == 8 * one["softmax"]
