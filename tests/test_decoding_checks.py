"""Exercises 6 and 7's NumPy references (mha_checks/decoding.py) are the functions the prompts ask for: cached
generation equals recomputation and equals the course's own decoder (mha_lib.decoder.Decoder) on the same
weights; grouped-query attention equals torch's kernel with enable_gqa; the mask agrees with exercise 5's at
T_q = T_k. Small sizes, float64, fixed seeds (well under a second)."""
import numpy as np
import torch
import torch.nn.functional as F

from mha_checks import decoding, hidden
from mha_lib.decoder import Decoder


def _inputs(case):
    prompt, dec, steps = case.args
    layers = [{"attn": layer["attn"].weights, **{k: v for k, v in layer.items() if k != "attn"}} for layer in dec.layers]
    return np.asarray(prompt, np.float64), layers, dec.final, dec.num_heads, dec.eps, steps


def test_cached_generation_equals_recomputation_and_the_course_decoder():
    rng = np.random.default_rng(0)
    case = hidden.generate_case(rng, np.float64, set())
    prompt, layers, final, h, eps, steps = _inputs(case)
    cached = decoding.generate(prompt, layers, final, h, eps, steps)
    np.testing.assert_allclose(cached, decoding.recompute(prompt, layers, final, h, eps, steps), atol=1e-10)
    d = prompt.shape[-1]
    ours = Decoder(len(layers), d, h, layers[0]["linear1_weight"].shape[0]).double().eval()
    with torch.no_grad():
        for block, w in zip(ours.layers, layers):
            for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
                getattr(block.self_attn, p).weight.copy_(torch.from_numpy(w["attn"][f"{p}_weight"]))
                getattr(block.self_attn, p).bias.copy_(torch.from_numpy(w["attn"][f"{p}_bias"]))
            for p in ("norm1", "norm2", "linear1", "linear2"):
                getattr(block, p).weight.copy_(torch.from_numpy(w[f"{p}_weight"]))
                getattr(block, p).bias.copy_(torch.from_numpy(w[f"{p}_bias"]))
        ours.norm.weight.copy_(torch.from_numpy(final["weight"]))
        ours.norm.bias.copy_(torch.from_numpy(final["bias"]))
        seq = torch.from_numpy(prompt)
        for _ in range(steps):
            seq = torch.cat([seq, ours(seq)[0][:, -1:]], dim=1)
    np.testing.assert_allclose(cached, seq[:, prompt.shape[1]:].numpy(), atol=1e-10)
    assert not np.allclose(cached, decoding.generate(prompt, layers, final, h, eps, steps, {"cache_not_kept"}))


def test_grouped_query_attention_is_torchs_kernel_and_the_mask_agrees_with_exercise_5():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 6, 5, 4)), rng.normal(size=(2, 2, 5, 4)), rng.normal(size=(2, 2, 5, 3))
    for causal in (False, True):
        out, _ = decoding.grouped_query_attention(q, k, v, causal)
        ref = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), is_causal=causal, enable_gqa=True)
        np.testing.assert_allclose(out, ref.numpy(), atol=1e-10)
    assert np.array_equal(decoding.allowed(5, 5), np.tril(np.ones((5, 5), bool)))        # exercise 5's at T_q = T_k
    assert np.array_equal(decoding.allowed(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])         # bottom-right otherwise
    assert np.array_equal(decoding.allowed(2, 4, {"mask_top_left"}), [[1, 0, 0, 0], [1, 1, 0, 0]])
