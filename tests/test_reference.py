"""The NumPy reference: its pieces, its per-head loop == its batched form, and == the torch module."""
import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from mha_lib import MultiHeadAttention, reference as R

TOL = dict(rtol=1e-10, atol=1e-12)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_split_heads_shape_and_content(rng):
    x = rng.normal(size=(2, 3, 12))                  # (B, T, d) with h=4, d_k=3
    heads = R.split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)               # (B, h, T, d_k)
    for i in range(4):                               # head i holds feature columns i*d_k:(i+1)*d_k
        assert_allclose(heads[:, i], x[..., 3 * i:3 * (i + 1)])


def test_merge_heads_inverts_split_heads(rng):
    x = rng.normal(size=(2, 5, 12))
    assert_allclose(R.merge_heads(R.split_heads(x, 3)), x)
    assert R.merge_heads(rng.normal(size=(2, 3, 5, 7))).shape == (2, 5, 21)  # (B, h, T, d_v) -> (B, T, h*d_v)
    assert R.split_heads(x[0], 3).shape == (3, 5, 4)                          # unbatched (T, d) -> (h, T, d_k)


def test_per_head_projections_equal_one_fused_projection(rng):
    params = R.init_params(12, 4, rng, kdim=5)
    x = rng.normal(size=(2, 3, 12))
    fused = R.split_heads(R.project(x, params.w_q, params.b_q), 4)  # (B, h, T, d_k)
    for i, head in enumerate(params.heads()):
        assert_allclose(fused[:, i], R.project(x, head.w_q, head.b_q), **TOL)


def test_softmax_is_stable_and_normalised():
    w = R.softmax(np.array([[1000.0, 1000.0, -1000.0], [0.0, np.log(3.0), -np.inf]]))
    assert_allclose(w, [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]], **TOL)


def test_softmax_jacobian_matches_autograd(rng):
    scores = rng.normal(size=(3, 5))
    for row, jac in zip(scores, R.softmax_jacobian(scores)):
        expected = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), torch.from_numpy(row))
        assert_allclose(jac, expected.numpy(), **TOL)


def test_sdpa_matches_torch_with_both_mask_forms(rng):
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 5))
    allowed = rng.random((3, 6)) < 0.6
    allowed[:, 0] = True
    additive = np.where(allowed, rng.normal(size=(3, 6)), -np.inf)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    for mask in (None, allowed, additive):
        out, weights = R.scaled_dot_product_attention(q, k, v, mask)
        expected = torch.nn.functional.scaled_dot_product_attention(
            t(q), t(k), t(v), attn_mask=None if mask is None else t(mask))
        assert_allclose(out, expected.numpy(), **TOL)
        assert_allclose(weights.sum(-1), 1.0, **TOL)


def test_causal_mask_hides_the_future(rng):
    x = rng.normal(size=(4, 3))
    _, weights = R.scaled_dot_product_attention(x, x, x, R.causal_mask(4))
    assert_allclose(np.triu(weights, k=1), 0.0)
    assert R.causal_mask(2, 3).tolist() == [[True, False, False], [True, True, False]]


@pytest.mark.parametrize("seed", range(6))
def test_loop_form_equals_batched_form(seed):
    rng = np.random.default_rng(seed)
    h, d_k, b, t_q, t_k = 3, 4, 2, 5, 7
    params = R.init_params(h * d_k, h, rng, kdim=6, vdim=9, bias=seed % 2 == 0)
    query, key, value = rng.normal(size=(b, t_q, h * d_k)), rng.normal(size=(b, t_k, 6)), rng.normal(size=(b, t_k, 9))
    mask = R.causal_mask(t_q, t_k) if seed % 3 == 0 else None
    batched = R.multi_head_attention(query, key, value, params, mask)
    looped = R.multi_head_attention_loop(query, key, value, params.heads(), params.w_o, params.b_o, mask)
    for got, expected in zip(looped, batched):
        assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("seed,kdim,vdim,bias,causal", [(0, None, None, True, True), (1, 5, 7, True, False),
                                                       (2, None, None, False, False), (3, 3, 8, False, False)])
def test_reference_equals_torch_module(seed, kdim, vdim, bias, causal):
    torch.manual_seed(seed)
    module = MultiHeadAttention(12, 3, bias=bias, kdim=kdim, vdim=vdim, batch_first=True, dtype=torch.float64)
    if bias:
        for p in module.parameters():
            torch.nn.init.normal_(p)
    t_k = 5 if causal else 6
    q = torch.randn(2, 5, 12, dtype=torch.float64)
    k = torch.randn(2, t_k, kdim or 12, dtype=torch.float64)
    v = torch.randn(2, t_k, vdim or 12, dtype=torch.float64)
    out, weights = module(q, k, v, is_causal=causal, average_attn_weights=False)
    ref_out, ref_weights = R.multi_head_attention(q.numpy(), k.numpy(), v.numpy(), module.reference_params(),
                                                  R.causal_mask(5) if causal else None)
    assert_allclose(ref_out, out.detach().numpy(), **TOL)
    assert_allclose(ref_weights, weights.detach().numpy(), **TOL)
