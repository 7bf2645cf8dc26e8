"""The hidden cases of every grade cell, drawn from a generator the grader seeds per submission
(the course's secret, the student and the notebook's bytes: see :func:`mha_grader.secret.rng`).

The free sizes are drawn; the properties a cell exists to test are fixed, so that every draw holds
every one of them (``tests/test_hidden.py`` draws a thousand secrets and checks each property):

* sizes all different within a case (code that only works when two sizes are equal fails);
* every call of a cell has its own lengths (a result cached in a module-level global fails);
* a transposed (non-contiguous) view wherever the exercise's input can be one: the heads that
  ``split_heads`` returns are a view, and ``merge_heads`` and ``output_projection_per_head`` take
  them; ``project``, ``split_heads``, ``output_projection``, ``fuse_heads`` and exercise 5 each
  get one such argument too;
* exercise 5's causal cross-attention has one call with more queries than keys and one with
  fewer; its causal self-attention has T_q = T_k;
* the dtypes of the visible tests: float64 in exercises 1-4, float32 in exercise 5 (torch's default).

Every case is small: a whole notebook's hidden cases run in well under a second.
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
MHA_DTYPE = np.float32  # exercise 5's visible tests run torch.randn's float32


def sizes(rng: np.random.Generator, ranges: list[tuple[int, int]], products: tuple = (),
          avoid: dict | None = None) -> list[int]:
    """Sizes drawn from ``ranges``, all different from each other and from the given products
    (index pairs whose product is also a size of the case); ``avoid`` maps an index to values it
    may not take (the lengths the cell's earlier calls used)."""
    avoid = avoid or {}
    while True:
        s: list[int] = []
        for i, (lo, hi) in enumerate(ranges):  # each size drawn among the values still free
            free = [v for v in range(lo, hi + 1) if v not in s and v not in avoid.get(i, ())]
            if not free:
                break
            s.append(free[int(rng.integers(len(free)))])
        extra = [s[i] * s[j] for i, j in products] if len(s) == len(ranges) else []
        if len(s) == len(ranges) and len(set(s + extra)) == len(s) + len(extra):
            return s


def view(a: np.ndarray, perm: tuple) -> np.ndarray:
    """``a``'s values as a non-contiguous view: a transposed copy transposed back (``perm`` moves the axes)."""
    return np.ascontiguousarray(a.transpose(perm)).transpose(np.argsort(perm))


def _linear(rng, fn, bias: bool, unbatched: bool = False, strided: bool = False, seen: set | None = None) -> Case:
    seen = set() if seen is None else seen
    if unbatched:
        t, d_in, d_out = sizes(rng, [(3, 7), (2, 5), (2, 6)], avoid={0: seen})
        x = rng.normal(size=(t, d_in))
    else:
        b, t, d_in, d_out = sizes(rng, [(2, 4), (3, 8), (2, 7), (2, 8)], avoid={1: seen})
        x = rng.normal(size=(b, t, d_in))
        x = view(x, (1, 0, 2)) if strided else x  # (B, T, d_in) read from a (T, B, d_in) buffer
    seen.add(t)
    w = rng.normal(size=(d_in, d_out))
    return Case(fn, NAMES[fn], (x, w, rng.normal(size=d_out) if bias else None))


def linear_cases(rng, fn: str, bias: bool, unbatched: bool) -> list[Case]:
    """Three batched cases (the second reads x through a transposed view), then one unbatched if asked."""
    seen: set = set()
    cases = [_linear(rng, fn, bias, strided=i == 1, seen=seen) for i in range(3)]
    return cases + ([_linear(rng, fn, bias, unbatched=True, seen=seen)] if unbatched else [])


def fuse_cases(rng) -> list[Case]:
    cases, seen = [], set()
    for i, with_bias in enumerate((True, True, False)):
        h, d, d_k = sizes(rng, [(2, 4), (3, 6), (2 if i == 1 else 1, 5)], avoid={1: seen})  # (d, 1) is contiguous
        seen.add(d)
        w = [rng.normal(size=(d, d_k)) for _ in range(h)]
        w = [view(w_i, (1, 0)) for w_i in w] if i == 1 else w  # heads kept as (d_k, d) rows, transposed
        b = [rng.normal(size=d_k) for _ in range(h)] if with_bias else None
        cases.append(Case("fuse_heads", NAMES["fuse_heads"], (w, b)))
    return cases


def split_cases(rng, check: str, n: int) -> list[Case]:
    cases, seen = [], set()
    for i in range(n):
        b, t, h, d_k = sizes(rng, [(2, 4), (2, 7), (2, 5), (1, 5)], products=((2, 3),), avoid={1: seen})
        seen.add(t)
        x = rng.normal(size=(b, t, h * d_k))
        cases.append(Case("split_heads", NAMES["split_heads"], (view(x, (1, 0, 2)) if i == 1 else x, h), check))
    return cases


def merge_cases(rng, check: str, n: int) -> list[Case]:
    """``n`` cases, the first a transposed view (what split_heads returns); for values, merge undoing split."""
    cases, seen = [], set()
    for i in range(n):
        shape = sizes(rng, [(2, 4), (2, 5), (2, 7), (1, 5)], products=((1, 3),), avoid={2: seen})
        seen.add(shape[2])
        x = rng.normal(size=shape)
        cases.append(Case("merge_heads", NAMES["merge_heads"], (view(x, (0, 2, 1, 3)) if i == 0 else x,), check))
    if check == "values":  # merge undoes split: the heads are split_heads's own view
        b, t, h, d_k = sizes(rng, [(2, 3), (4, 8), (2, 3), (2, 5)], products=((2, 3),), avoid={1: seen})
        x = rng.normal(size=(b, t, h * d_k))
        heads = x.reshape(b, t, h, d_k).transpose(0, 2, 1, 3)  # (B, T, h, d_k) -> (B, h, T, d_k), a view
        cases.append(Case("merge_heads", NAMES["merge_heads"], (heads,), expected=x))
    return cases


def per_head_cases(rng) -> list[Case]:
    cases, seen = [], set()
    for i in range(3):
        b, h, t, d_v, d_model = sizes(rng, [(2, 3), (2, 4), (3, 7), (1, 4), (2, 7)], products=((1, 3),),
                                      avoid={2: seen})
        seen.add(t)
        heads = rng.normal(size=(b, h, t, d_v))
        cases.append(Case("output_projection_per_head", NAMES["output_projection_per_head"],
                          (view(heads, (0, 2, 1, 3)) if i == 0 else heads, rng.normal(size=(h * d_v, d_model)),
                           rng.normal(size=d_model))))
    return cases


def random_mha(rng, d_model: int, h: int) -> MhaWeights:
    """Weights AND biases random (torch starts biases at 0, which would hide a forgotten bias)."""
    scale = 1 / np.sqrt(d_model)
    shapes = {"in_proj_weight": (3 * d_model, d_model), "in_proj_bias": (3 * d_model,),
              "out_proj_weight": (d_model, d_model), "out_proj_bias": (d_model,)}
    return MhaWeights(d_model, h, {k: (rng.normal(size=s) * scale).astype(MHA_DTYPE) for k, s in shapes.items()})


def _tensor(rng, shape, strided: bool) -> calling.Tensor:
    x = rng.normal(size=shape).astype(MHA_DTYPE)
    return calling.Tensor(view(x, (1, 0, 2)) if strided else x)  # (B, T, d) read from a (T, B, d) buffer


def mha_case(rng, cross: bool, causal: bool, check: str = "values", order: str = "", strided: bool = False,
             seen: set | None = None) -> Case:
    """B, T_q, T_k, h, d_k, d_model all different (T_q == T_k for self-attention). ``order`` fixes how
    T_q compares with T_k in cross-attention ("<" or ">"); ``seen`` holds the lengths the cell's other
    calls used (none is used again; this call's are added)."""
    seen = set() if seen is None else seen
    while True:
        if cross:
            b, t_q, t_k, h, d_k = sizes(rng, [(2, 3), (2, 12), (2, 12), (2, 5), (2, 5)], products=((3, 4),),
                                        avoid={1: seen, 2: seen})
        else:
            b, t_q, h, d_k = sizes(rng, [(2, 3), (2, 8), (2, 5), (2, 5)], products=((2, 3),), avoid={1: seen})
            t_k = t_q
        if h == d_k * d_k:  # sqrt(h) would equal sqrt(d_k)**2 = d_k: a wrong scale could not be told apart
            continue
        if cross and abs(t_q - t_k) < 2:  # a mask aligned to the last key would equal tril(1) or tril(-1)
            continue
        if (order == "<" and t_q > t_k) or (order == ">" and t_q < t_k):
            t_q, t_k = t_k, t_q
        break
    seen.update({t_q, t_k})
    d = h * d_k
    query = _tensor(rng, (b, t_q, d), strided)
    if cross:
        key, value = _tensor(rng, (b, t_k, d), strided), _tensor(rng, (b, t_k, d), strided)
    else:
        key = value = query
    return Case("multi_head_attention", NAMES["multi_head_attention"],
                (query, key, value, random_mha(rng, d, h), causal), check)


def mha_cases(rng, calls: list[dict], check: str = "values") -> list[Case]:
    """One cell's calls of exercise 5 (each a dict of :func:`mha_case`'s options), no length used twice."""
    seen: set = set()
    return [mha_case(rng, check=check, seen=seen, **c) for c in calls]


CROSS = [{"cross": True, "causal": False, "order": "<"},
         {"cross": True, "causal": False, "order": ">", "strided": True},  # query, key, value: views
         {"cross": True, "causal": True, "order": ">"}, {"cross": True, "causal": True, "order": "<"}]


def hidden_cases(grade_id: str, rng: np.random.Generator) -> list[Case]:
    """The hidden cases of one grade cell (KeyError for an unknown grade_id)."""
    makers = {
        "test_project_values": lambda: linear_cases(rng, "project", False, unbatched=True),
        "test_project_bias": lambda: linear_cases(rng, "project", True, unbatched=True),
        "test_fuse_heads": lambda: fuse_cases(rng),
        "test_split_heads_shape": lambda: split_cases(rng, "shape", 4),
        "test_split_heads_values": lambda: split_cases(rng, "values", 3),
        "test_merge_heads_shape": lambda: merge_cases(rng, "shape", 4),
        "test_merge_heads_values": lambda: merge_cases(rng, "values", 3),
        "test_output_projection_values": lambda: linear_cases(rng, "output_projection", False, unbatched=False),
        "test_output_projection_bias": lambda: linear_cases(rng, "output_projection", True, unbatched=False),
        "test_output_projection_per_head": lambda: per_head_cases(rng),
        "test_mha_shapes": lambda: mha_cases(rng, [{"cross": True, "causal": False, "order": ">"},
                                                   {"cross": True, "causal": False, "order": "<"}], "shape"),
        "test_mha_weights": lambda: mha_cases(rng, [{"cross": False, "causal": True}] * 2, "weights"),
        "test_mha_self_attention": lambda: mha_cases(rng, [{"cross": False, "causal": False}] * 3),
        "test_mha_causal": lambda: mha_cases(rng, [{"cross": False, "causal": True}] * 3),
        "test_mha_cross": lambda: mha_cases(rng, CROSS),
    }
    if grade_id not in makers:
        raise KeyError(f"no hidden cases for grade cell {grade_id!r}")
    return makers[grade_id]()
