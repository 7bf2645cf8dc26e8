"""mha_lib.MultiHeadAttention is the same function as torch.nn.MultiheadAttention.

Float64, tolerance 1e-10, over 128 seeded random configurations that cycle through every
option: self- and cross-attention (L != S, kdim/vdim != embed_dim), bias on/off, batch_first
both ways, unbatched input, every mask kind, weights averaged / per head / not needed.
Outputs, weights and gradients (inputs and parameters) are compared.
"""
import inspect
import itertools
import random
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from mha_lib import MultiHeadAttention
from mha_lib.module import _to_ours

TOL = dict(rtol=1e-10, atol=1e-10)
MASKS = ("none", "bool2d", "float2d", "bool3d", "float3d", "padding_bool", "padding_float",
         "causal", "causal+padding", "bool2d+padding_float")
WEIGHTS = ("average", "per_head", "none")


@dataclass(frozen=True)
class Config:
    seed: int
    heads: int
    head_dim: int
    batch: int | None  # None = unbatched input
    tgt_len: int
    src_len: int
    kdim: int | None
    vdim: int | None
    bias: bool
    batch_first: bool
    mask: str
    weights: str

    @property
    def embed_dim(self) -> int:
        return self.heads * self.head_dim


def make_configs(n: int = 128) -> list[Config]:
    """Cycle the discrete options (every mask kind meets every weight mode), draw sizes at random."""
    options = itertools.cycle(itertools.product(MASKS, WEIGHTS))
    configs = []
    for seed in range(n):
        rng = random.Random(seed)
        mask, weights = next(options)
        cross = seed % 2 == 1 and not mask.startswith("causal")
        tgt_len = rng.randint(2, 7)
        configs.append(Config(
            seed=seed, heads=rng.randint(1, 4), head_dim=rng.randint(2, 5),
            batch=None if seed % 9 == 4 else rng.randint(1, 4), tgt_len=tgt_len,
            src_len=rng.randint(2, 8) if cross else tgt_len,
            kdim=rng.choice([None, rng.randint(2, 9)]) if cross else None,
            vdim=rng.choice([None, rng.randint(2, 9)]) if cross else None,
            bias=seed % 3 != 2, batch_first=seed % 4 < 2, mask=mask, weights=weights))
    return configs


def make_masks(cfg: Config, g: torch.Generator) -> dict:
    """torch-convention masks (True / -inf = blocked); key 0 is never blocked, so no row is empty."""
    L, S, n, h = cfg.tgt_len, cfg.src_len, cfg.batch or 1, cfg.heads

    def blocked(*shape):
        b = torch.rand(*shape, generator=g, dtype=torch.float64) < 0.35
        b[..., 0] = False
        return b

    def additive(b):
        return torch.zeros(b.shape, dtype=torch.float64).masked_fill(b, float("-inf")) + \
            torch.randn(b.shape, generator=g, dtype=torch.float64)

    padding = (n, S) if cfg.batch else (S,)
    kinds = {
        "bool2d": lambda: {"attn_mask": blocked(L, S)},
        "float2d": lambda: {"attn_mask": additive(blocked(L, S))},
        "bool3d": lambda: {"attn_mask": blocked(n * h, L, S)},
        "float3d": lambda: {"attn_mask": additive(blocked(n * h, L, S))},
        "padding_bool": lambda: {"key_padding_mask": blocked(*padding)},
        "padding_float": lambda: {"key_padding_mask": additive(blocked(*padding))},
        "causal": lambda: {"attn_mask": nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64),
                           "is_causal": True},
        "causal+padding": lambda: {"attn_mask": ~torch.ones(L, L, dtype=torch.bool).tril(),
                                   "key_padding_mask": blocked(*padding), "is_causal": True},
        "bool2d+padding_float": lambda: {"attn_mask": blocked(L, S), "key_padding_mask": additive(blocked(*padding))},
    }
    return kinds.get(cfg.mask, dict)()


def make_inputs(cfg: Config, g: torch.Generator) -> list[torch.Tensor]:
    def shaped(length, width):
        if cfg.batch is None:
            shape = (length, width)
        else:
            shape = (cfg.batch, length, width) if cfg.batch_first else (length, cfg.batch, width)
        return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)

    query = shaped(cfg.tgt_len, cfg.embed_dim)
    if cfg.src_len == cfg.tgt_len and cfg.kdim is None and cfg.vdim is None and cfg.seed % 2 == 0:
        return [query, query, query]  # true self-attention: one tensor in all three roles
    return [query, shaped(cfg.src_len, cfg.kdim or cfg.embed_dim), shaped(cfg.src_len, cfg.vdim or cfg.embed_dim)]


def run(module, inputs, masks, cfg):
    return module(*inputs, need_weights=cfg.weights != "none", average_attn_weights=cfg.weights == "average",
                  **masks)


def loss_and_grads(out, weights, inputs, module, g):
    """A random linear functional of the outputs; its gradients w.r.t. the inputs and each parameter."""
    loss = (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum()
    if weights is not None:
        loss = loss + (weights * torch.randn(weights.shape, generator=g, dtype=weights.dtype)).sum()
    unique = list({id(t): t for t in inputs}.values())
    names, params = zip(*module.named_parameters())
    grads = torch.autograd.grad(loss, unique + list(params))
    return grads[:len(unique)], dict(zip(names, grads[len(unique):]))


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask:UserWarning")  # torch's own, by design
@pytest.mark.parametrize("cfg", make_configs(), ids=lambda c: f"{c.seed}-{c.mask}-{c.weights}")
def test_matches_torch(cfg: Config):
    torch.manual_seed(cfg.seed)
    theirs = nn.MultiheadAttention(cfg.embed_dim, cfg.heads, bias=cfg.bias, kdim=cfg.kdim, vdim=cfg.vdim,
                                   batch_first=cfg.batch_first, dtype=torch.float64)
    if cfg.bias:  # torch initialises biases to zero; make them matter
        with torch.no_grad():
            theirs.in_proj_bias.normal_()
            theirs.out_proj.bias.normal_()
    ours = MultiHeadAttention.from_torch(theirs)

    g = torch.Generator().manual_seed(cfg.seed)
    inputs, masks = make_inputs(cfg, g), make_masks(cfg, g)
    out_t, w_t = run(theirs, inputs, masks, cfg)
    out_o, w_o = run(ours, inputs, masks, cfg)

    torch.testing.assert_close(out_o, out_t, **TOL)
    if cfg.weights == "none":
        assert w_o is None and w_t is None
    else:
        torch.testing.assert_close(w_o, w_t, **TOL)

    input_grads_t, param_grads_t = loss_and_grads(out_t, w_t, inputs, theirs, torch.Generator().manual_seed(cfg.seed))
    input_grads_o, param_grads_o = loss_and_grads(out_o, w_o, inputs, ours, torch.Generator().manual_seed(cfg.seed))
    for got, expected in zip(input_grads_o, input_grads_t):
        torch.testing.assert_close(got, expected, **TOL)
    param_grads_t = _to_ours(param_grads_t, theirs._qkv_same_embed_dim)  # torch's names -> ours
    assert param_grads_o.keys() == param_grads_t.keys()
    for name, got in param_grads_o.items():
        torch.testing.assert_close(got, param_grads_t[name], **TOL, msg=name)


def test_configs_cover_every_option():
    configs = make_configs()
    assert len(configs) >= 100
    seen = lambda f: {f(c) for c in configs}  # noqa: E731
    assert seen(lambda c: c.mask) == set(MASKS) and seen(lambda c: c.weights) == set(WEIGHTS)
    assert seen(lambda c: c.bias) == seen(lambda c: c.batch_first) == {True, False}
    assert None in seen(lambda c: c.batch), "unbatched input"
    assert any(c.src_len != c.tgt_len for c in configs), "query length != key length"
    assert any(c.kdim not in (None, c.embed_dim) for c in configs), "kdim != embed_dim"
    assert any(c.vdim not in (None, c.embed_dim) for c in configs), "vdim != embed_dim"


@pytest.mark.parametrize("need_weights", [True, False])
def test_dropout_matches_torch(need_weights):
    """In training mode both draw the same dropout mask from the same seed."""
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(12, 3, dropout=0.4, batch_first=True, dtype=torch.float64)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.training and ours.dropout == 0.4
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    results = []
    for module in (theirs, ours):
        torch.manual_seed(7)
        results.append(module(x, x, x, need_weights=need_weights, average_attn_weights=False))
    torch.testing.assert_close(results[1][0], results[0][0], **TOL)
    if need_weights:
        torch.testing.assert_close(results[1][1], results[0][1], **TOL)
        assert (results[1][1] == 0).any(), "dropout zeroed no weight"


def test_eval_mode_disables_dropout():
    torch.manual_seed(1)
    ours = MultiHeadAttention(8, 2, dropout=0.5, dtype=torch.float64).eval()
    x = torch.randn(3, 2, 8, dtype=torch.float64)
    torch.testing.assert_close(ours(x, x, x)[0], ours(x, x, x)[0], rtol=0, atol=0)


def test_inference_fast_path_matches():
    """Under no_grad in eval mode torch takes its native fused kernel; we still agree."""
    torch.manual_seed(2)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(3, 6, 16, dtype=torch.float64)
    with torch.no_grad():
        for need_weights in (True, False):
            torch.testing.assert_close(ours(x, x, x, need_weights=need_weights)[0],
                                       theirs(x, x, x, need_weights=need_weights)[0], **TOL)


def test_is_causal_without_mask_builds_the_causal_mask():
    torch.manual_seed(3)
    ours = MultiHeadAttention(12, 3, batch_first=True, dtype=torch.float64)
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    for need_weights in (True, False):
        torch.testing.assert_close(ours(x, x, x, is_causal=True, need_weights=need_weights)[0],
                                   ours(x, x, x, attn_mask=mask, need_weights=need_weights)[0], **TOL)


@pytest.mark.parametrize("kdim,vdim,bias", [(None, None, True), (5, 7, True), (None, None, False), (3, 3, False)])
def test_round_trip_to_torch(kdim, vdim, bias):
    torch.manual_seed(4)
    ours = MultiHeadAttention(12, 4, kdim=kdim, vdim=vdim, bias=bias, batch_first=True, dtype=torch.float64)
    back = MultiHeadAttention.from_torch(ours.to_torch())
    for (name, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=name)
    q = torch.randn(2, 3, 12, dtype=torch.float64)
    k = torch.randn(2, 4, kdim or 12, dtype=torch.float64)
    v = torch.randn(2, 4, vdim or 12, dtype=torch.float64)
    torch.testing.assert_close(ours.to_torch()(q, k, v)[0], ours(q, k, v)[0], **TOL)


def test_from_torch_refuses_extras_it_does_not_implement():
    with pytest.raises(ValueError, match=r"add_bias_kv=True"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))


@pytest.mark.parametrize("embed_dim, heads, kdim, vdim, bias",
                         [(12, 3, None, None, True), (10, 2, None, None, False), (8, 4, 5, 7, True),
                          (6, 3, None, 9, False)])
def test_initialisation_is_torchs_draw_for_draw(embed_dim, heads, kdim, vdim, bias):
    """Same seed, same configuration: bit-identical weights and biases to torch's layer."""
    torch.manual_seed(11)
    ours = MultiHeadAttention(embed_dim, heads, bias=bias, kdim=kdim, vdim=vdim).to_torch()
    torch.manual_seed(11)
    theirs = nn.MultiheadAttention(embed_dim, heads, bias=bias, kdim=kdim, vdim=vdim)
    ours_state, their_state = ours.state_dict(), theirs.state_dict()
    assert ours_state.keys() == their_state.keys()
    for name, tensor in their_state.items():
        assert torch.equal(ours_state[name], tensor), name


def test_initialisation_bound_is_the_packed_xavier_bound():
    """In-projections are uniform on +-sqrt(6/(4E)) (packed (3E, E)), not +-sqrt(6/(2E)); biases 0."""
    embed_dim = 96
    torch.manual_seed(3)
    layer = MultiHeadAttention(embed_dim, 4)
    w = torch.cat([layer.q_proj.weight, layer.k_proj.weight, layer.v_proj.weight]).detach()
    bound = (6 / (4 * embed_dim)) ** 0.5
    assert w.abs().max() <= bound
    assert w.abs().max() > 0.99 * bound                          # fills the interval ...
    assert abs(w.var().item() / (bound**2 / 3) - 1) < 0.03       # ... uniformly: Var = bound^2 / 3
    assert w.abs().max() < 0.75 * (6 / (2 * embed_dim)) ** 0.5   # far below the separate-matrix bound
    assert all(float(p.bias.detach().abs().max()) == 0.0
               for p in (layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj))


def test_meta_device_construction_draws_nothing():
    """device='meta' (shape-only work, e.g. FLOP counting) still builds the layer."""
    layer = MultiHeadAttention(16, 4, device="meta")
    assert layer.q_proj.weight.device.type == "meta" and layer.q_proj.weight.shape == (16, 16)


def test_what_the_module_docstring_says_differs_from_torch():
    """Same forward, constructor without add_bias_kv/add_zero_attn, state_dict via from_torch."""
    ours, theirs = (inspect.signature(cls.__init__).parameters
                    for cls in (MultiHeadAttention, nn.MultiheadAttention))
    assert [n for n in theirs if n not in ours] == ["add_bias_kv", "add_zero_attn"]
    assert all(ours[n].default == theirs[n].default for n in ours if n != "self")
    assert list(inspect.signature(MultiHeadAttention.forward).parameters) == list(
        inspect.signature(nn.MultiheadAttention.forward).parameters)
    mha = nn.MultiheadAttention(8, 2)
    with pytest.raises(RuntimeError, match="in_proj_weight"):
        MultiHeadAttention(8, 2).load_state_dict(mha.state_dict())
    MultiHeadAttention.from_torch(mha)
