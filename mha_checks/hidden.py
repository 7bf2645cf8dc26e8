"""The hidden cases of every grade cell, drawn from a generator the grader seeds with the course's
secret: sizes all different within a case (code that only works when two sizes are equal fails),
values random. Every case is small: a whole notebook's hidden cases run in well under a second.

What each grade cell covers (as the notebooks' BEGIN HIDDEN TESTS blocks did):
project values (no bias, batched and unbatched) and bias; fuse_heads with and without biases;
split/merge shapes and values, merge undoing split; W^O with and without b_o, per head;
multi_head_attention shapes (cross-attention), weights (causal self-attention), values for
self-attention, causal self-attention and cross-attention (T_q != T_k, causal or not).
"""
import numpy as np

from . import calling
from .cases import Case, MhaWeights

GRADE_CELLS = {
    "test_project_values": "01_project", "test_project_bias": "01_project", "test_fuse_heads": "01_project",
    "test_split_heads_shape": "02_split_heads", "test_split_heads_values": "02_split_heads",
    "test_merge_heads_shape": "03_merge_heads", "test_merge_heads_values": "03_merge_heads",
    "test_output_projection_values": "04_output_projection", "test_output_projection_bias": "04_output_projection",
    "test_output_projection_per_head": "04_output_projection",
    "test_mha_shapes": "05_assembly", "test_mha_weights": "05_assembly", "test_mha_self_attention": "05_assembly",
    "test_mha_causal": "05_assembly", "test_mha_cross": "05_assembly",
}

NAMES = {
    "project": ("x", "w", "b"), "fuse_heads": ("w_heads", "b_heads"), "split_heads": ("x", "num_heads"),
    "merge_heads": ("x",), "output_projection": ("x", "w_o", "b_o"),
    "output_projection_per_head": ("heads", "w_o", "b_o"),
    "multi_head_attention": ("query", "key", "value", "mha", "causal"),
}


def sizes(rng: np.random.Generator, ranges: list[tuple[int, int]], products: tuple = ()) -> list[int]:
    """Sizes drawn from ``ranges``, all different from each other and from the given products
    (index pairs whose product is also a size of the case)."""
    while True:
        s = [int(rng.integers(lo, hi + 1)) for lo, hi in ranges]
        extra = [s[i] * s[j] for i, j in products]
        if len(set(s + extra)) == len(s) + len(extra):
            return s


def _linear(rng, fn, bias: bool, unbatched: bool = False) -> Case:
    if unbatched:
        t, d_in, d_out = sizes(rng, [(3, 7), (2, 5), (2, 6)])
        x = rng.normal(size=(t, d_in))
    else:
        b, t, d_in, d_out = sizes(rng, [(2, 4), (3, 6), (2, 7), (2, 8)])
        x = rng.normal(size=(b, t, d_in))
    w = rng.normal(size=(d_in, d_out))
    return Case(fn, NAMES[fn], (x, w, rng.normal(size=d_out) if bias else None))


def project_cases(rng, bias: bool) -> list[Case]:
    return [_linear(rng, "project", bias) for _ in range(3)] + [_linear(rng, "project", bias, unbatched=True)]


def fuse_cases(rng) -> list[Case]:
    cases = []
    for with_bias in (True, True, False):
        h, d, d_k = sizes(rng, [(2, 4), (3, 6), (1, 5)])
        w = [rng.normal(size=(d, d_k)) for _ in range(h)]
        b = [rng.normal(size=d_k) for _ in range(h)] if with_bias else None
        cases.append(Case("fuse_heads", NAMES["fuse_heads"], (w, b)))
    return cases


def split_cases(rng, check: str, n: int) -> list[Case]:
    cases = []
    for _ in range(n):
        b, t, h, d_k = sizes(rng, [(2, 4), (2, 7), (2, 5), (1, 5)], products=((2, 3),))
        cases.append(Case("split_heads", NAMES["split_heads"], (rng.normal(size=(b, t, h * d_k)), h), check))
    return cases


def merge_cases(rng, check: str, n: int) -> list[Case]:
    cases = []
    for _ in range(n):
        shape = sizes(rng, [(2, 4), (2, 5), (2, 7), (1, 5)], products=((1, 3),))
        cases.append(Case("merge_heads", NAMES["merge_heads"], (rng.normal(size=shape),), check))
    if check == "values":  # merge undoes split
        b, t, h, d_k = sizes(rng, [(2, 3), (4, 6), (2, 3), (2, 5)], products=((2, 3),))
        x = rng.normal(size=(b, t, h * d_k))
        heads = x.reshape(b, t, h, d_k).transpose(0, 2, 1, 3).copy()
        cases.append(Case("merge_heads", NAMES["merge_heads"], (heads,), expected=x))
    return cases


def per_head_cases(rng) -> list[Case]:
    cases = []
    for _ in range(3):
        b, h, t, d_v, d_model = sizes(rng, [(2, 3), (2, 4), (3, 6), (1, 4), (2, 7)], products=((1, 3),))
        cases.append(Case("output_projection_per_head", NAMES["output_projection_per_head"],
                          (rng.normal(size=(b, h, t, d_v)), rng.normal(size=(h * d_v, d_model)),
                           rng.normal(size=d_model))))
    return cases


def random_mha(rng, d_model: int, h: int) -> MhaWeights:
    """Weights AND biases random (torch starts biases at 0, which would hide a forgotten bias)."""
    scale = 1 / np.sqrt(d_model)
    shapes = {"in_proj_weight": (3 * d_model, d_model), "in_proj_bias": (3 * d_model,),
              "out_proj_weight": (d_model, d_model), "out_proj_bias": (d_model,)}
    return MhaWeights(d_model, h, {k: rng.normal(size=s) * scale for k, s in shapes.items()})


def mha_case(rng, cross: bool, causal: bool, check: str = "values") -> Case:
    """B, T_q, T_k, h, d_k, d_model all different (T_q == T_k for self-attention)."""
    if cross:
        b, t_q, t_k, h, d_k = sizes(rng, [(2, 3), (2, 6), (2, 7), (2, 5), (2, 5)], products=((3, 4),))
    else:
        b, t_q, h, d_k = sizes(rng, [(2, 3), (2, 7), (2, 5), (2, 5)], products=((2, 3),))
        t_k = t_q
    if h == d_k * d_k:  # sqrt(h) would equal sqrt(d_k)**2 = d_k: a wrong scale could not be told apart
        return mha_case(rng, cross, causal, check)
    if cross and abs(t_q - t_k) < 2:  # a mask aligned to the last key would equal tril(1) or tril(-1)
        return mha_case(rng, cross, causal, check)
    d = h * d_k
    query = calling.Tensor(rng.normal(size=(b, t_q, d)))
    if cross:
        key, value = calling.Tensor(rng.normal(size=(b, t_k, d))), calling.Tensor(rng.normal(size=(b, t_k, d)))
    else:
        key = value = query
    return Case("multi_head_attention", NAMES["multi_head_attention"],
                (query, key, value, random_mha(rng, d, h), causal), check)


def hidden_cases(grade_id: str, rng: np.random.Generator) -> list[Case]:
    """The hidden cases of one grade cell (KeyError for an unknown grade_id)."""
    makers = {
        "test_project_values": lambda: project_cases(rng, bias=False),
        "test_project_bias": lambda: project_cases(rng, bias=True),
        "test_fuse_heads": lambda: fuse_cases(rng),
        "test_split_heads_shape": lambda: split_cases(rng, "shape", 4),
        "test_split_heads_values": lambda: split_cases(rng, "values", 3),
        "test_merge_heads_shape": lambda: merge_cases(rng, "shape", 4),
        "test_merge_heads_values": lambda: merge_cases(rng, "values", 3),
        "test_output_projection_values": lambda: [_linear(rng, "output_projection", False) for _ in range(3)],
        "test_output_projection_bias": lambda: [_linear(rng, "output_projection", True) for _ in range(3)],
        "test_output_projection_per_head": lambda: per_head_cases(rng),
        "test_mha_shapes": lambda: [mha_case(rng, True, False, "shape") for _ in range(2)],
        "test_mha_weights": lambda: [mha_case(rng, False, True, "weights") for _ in range(2)],
        "test_mha_self_attention": lambda: [mha_case(rng, False, False) for _ in range(3)],
        "test_mha_causal": lambda: [mha_case(rng, False, True) for _ in range(3)],
        "test_mha_cross": lambda: [mha_case(rng, True, c) for c in (False, False, True, True)],
    }
    if grade_id not in makers:
        raise KeyError(f"no hidden cases for grade cell {grade_id!r}")
    return makers[grade_id]()
