"""The hidden cases of every grade cell, drawn from a generator the grader seeds per submission
(the course's secret, the student and the notebook's bytes: see :func:`mha_grader.trusted.secret.rng`).

Two kinds of call, in this order, in every cell and under every secret:

* **discriminating** calls: sizes all different within a call (code that only works when two sizes
  are equal fails), every call with lengths of its own (a result cached in a module-level global
  fails), a transposed (non-contiguous) view wherever the exercise's input can be one, exercise 5's
  cross-attention with T_q above and below T_k; they come first, so that a wrong answer is judged
  (and its mistake named) on the sizes that tell mistakes apart best;
* **domain** calls: every other kind of input the cell's prompt and docstring allow, listed in
  :data:`KINDS` next to each maker below: square matrices (a square W^O, h*d_v = d_model), each
  optional argument left out, passed as None and given (exercise 5's ``causal`` left out as well as
  passed), the boundary size 1 of every size a prompt
  allows to be 1 (B, T, h, d_k, ...), self- and cross-attention, and the cell's own worked example
  with its stated answer.

``tests/test_hidden.py`` draws a thousand secrets and finds, from the arguments alone, every kind of
:data:`KINDS` and every property above in every cell, each time. The dtypes are the visible tests':
float64 in exercises 1-4, float32 in exercise 5 (torch's default). Every case is small: a whole
notebook's hidden cases run in well under a second.
"""
import itertools

import numpy as np

from . import calling
from .cases import AttnWeights, Case, DecoderWeights, MhaWeights

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

# --- what each cell's prompt allows, drawn in every secret (tests/test_hidden.py finds each one) ----------

_LINEAR = {"batched": "x is (B, T, d_in)", "view": "x is a transposed (non-contiguous) view",
           "non-square": "w is (d_in, d_out) with d_in != d_out", "square": "w is square, d_in = d_out",
           "B=1": "a batch of one", "T=1": "a sequence of one position", "d_in=1": "one input feature",
           "d_out=1": "one output feature", "worked example": "the prompt's worked example, with its stated answer"}
KINDS = {
    "test_project_values": {**_LINEAR, "unbatched": "x is (T, d_in), a single sequence",
                            "b omitted": "project(x, w)", "b=None": "project(x, w, None)"},
    "test_project_bias": {**_LINEAR, "unbatched": "x is (T, d_in), a single sequence",
                          "b given": "b is (d_out,)", "b=None": "project(x, w, None): no bias"},
    "test_fuse_heads": {"b_heads given": "a list of h biases (d_k,)", "b_heads=None": "fuse_heads(w_heads, None)",
                        "b_heads omitted": "fuse_heads(w_heads)", "view": "the heads are transposed views",
                        "h=1": "one head", "d_k=1": "heads of width one", "d=1": "one input feature",
                        "fused square": "d = h*d_k, the usual square projection",
                        "all different": "h, d, d_k and h*d_k all different",
                        "worked example": "the visible test's example, with its stated answer"},
    "test_split_heads_shape": {"all different": "B, T, h, d_k and d all different", "view": "x is a view",
                               "T divisible by h": "T a multiple of h (a split along time does not raise)",
                               "T not divisible by h": "T not a multiple of h", "B=1": "a batch of one",
                               "T=1": "one position", "h=1": "one head", "d_k=1": "heads of width one (d = h)",
                               "worked example": "the prompt's worked example"},
    "test_merge_heads_shape": {"all different": "B, h, T, d_v and h*d_v all different", "view": "x is a view",
                               "B=1": "a batch of one", "h=1": "one head", "T=1": "one position",
                               "d_v=1": "heads of width one", "worked example": "the prompt's worked example"},
    "test_output_projection_values": {**_LINEAR, "b omitted": "output_projection(x, w_o)",
                                      "b=None": "output_projection(x, w_o, None)"},
    "test_output_projection_bias": {**_LINEAR, "b given": "b_o is (d_model,)", "b=None": "b_o=None: no bias"},
    "test_output_projection_per_head": {"all different": "B, h, T, d_v, d_model, h*d_v all different",
                                        "view": "heads is a view", "square": "W^O square, h*d_v = d_model",
                                        "b given": "b_o is (d_model,)", "b=None": "b_o=None",
                                        "b omitted": "output_projection_per_head(heads, w_o)",
                                        "B=1": "a batch of one", "h=1": "one head", "T=1": "one position",
                                        "d_v=1": "heads of width one", "d_model=1": "one output feature",
                                        "worked example": "the prompt's worked example (no b_o)"},
}
KINDS["test_split_heads_values"] = KINDS["test_split_heads_shape"]
KINDS["test_merge_heads_values"] = {**KINDS["test_merge_heads_shape"], "merge undoes split": "split_heads's own view"}
_MHA = {"B=1": "a batch of one", "h=1": "one head (d_k = d_model)", "d_k=1": "heads of width one (d_model = h)",
        "T_q=1": "one query"}
_UNMASKED = {"not causal": "causal=False", "causal omitted": "multi_head_attention(query, key, value, mha): "
             "causal left at its default, False"}
KINDS.update({
    "test_mha_shapes": {**_MHA, **_UNMASKED, "self": "self-attention: key and value are the query",
                        "cross T_q>T_k": "", "cross T_q<T_k": "", "causal": "causal=True", "T_k=1": "one key"},
    "test_mha_weights": {**_MHA, "self": "causal self-attention", "cross T_q>T_k": "causal, more queries than keys",
                         "cross T_q<T_k": "causal, fewer queries than keys", **_UNMASKED, "T=1": "one position",
                         "worked example": "the prompt's worked example"},
    "test_mha_self_attention": {**_MHA, **_UNMASKED, "self": "key and value are the query", "T=1": "one position"},
    "test_mha_causal": {**_MHA, "self": "causal self-attention", "T=1": "one position",
                        "worked example": "the prompt's worked example, with its stated answer"},
    "test_mha_cross": {**_MHA, **_UNMASKED, "cross T_q>T_k": "", "cross T_q<T_k": "", "causal": "",
                       "view": "query, key and value are views", "T_k=1": "one key",
                       "key is value": "key and value are the same tensor (an encoder's memory)"},
})


def sizes(rng: np.random.Generator, ranges: list[tuple[int, int]], products: tuple = (),
          avoid: dict | None = None) -> list[int]:
    """Sizes drawn from ``ranges``, all different from each other and from the given products
    (index pairs whose product is also a size of the case); ``avoid`` maps an index to values it
    may not take (the lengths the cell's earlier calls used). A range (v, v) fixes a size at v,
    outside the rule (a boundary size: 1, or a square matrix's other side)."""
    avoid = avoid or {}
    fixed = {i: lo for i, (lo, hi) in enumerate(ranges) if lo == hi}
    allowed = [[v for v in range(lo, hi + 1) if v not in avoid.get(i, ())] for i, (lo, hi) in enumerate(ranges)]
    while True:
        s: list[int] = []
        for i, (lo, hi) in enumerate(ranges):  # each size drawn among the values still free
            if i in fixed:
                s.append(lo)
                continue
            free = [v for v in allowed[i] if v not in s]
            if not free:
                break
            s.append(free[int(rng.integers(len(free)))])
        if len(s) != len(ranges):
            continue
        drawn = [v for i, v in enumerate(s) if i not in fixed]
        extra = [s[i] * s[j] for i, j in products if i not in fixed and j not in fixed]
        if len(set(drawn + extra)) == len(drawn) + len(extra):
            return s


def view(a: np.ndarray, perm: tuple) -> np.ndarray:
    """``a``'s values as a non-contiguous view: a transposed copy transposed back (``perm`` moves the axes)."""
    return np.ascontiguousarray(a.transpose(perm)).transpose(sorted(range(len(perm)), key=perm.__getitem__))


# --- exercises 1 and 4, part A: x @ w + b ------------------------------------------------------------

def _linear(rng, fn, b_arg: str, shape: str = "batched", strided: bool = False, seen: set | None = None) -> Case:
    """One call of project / output_projection. ``b_arg``: "given", "None" or "omitted"; ``shape``:
    "batched", "unbatched", "square" (d_in = d_out), "B=1,d_in=1" or "T=1,d_out=1"."""
    seen = set() if seen is None else seen
    if shape == "unbatched":
        t, d_in, d_out = sizes(rng, [(3, 7), (2, 5), (2, 6)], avoid={0: seen})
        x = rng.normal(size=(t, d_in))
    else:
        ranges = {"batched": [(2, 4), (3, 8), (2, 7), (2, 8)], "square": [(2, 4), (3, 8), (2, 7), (2, 7)],
                  "B=1,d_in=1": [(1, 1), (3, 8), (1, 1), (2, 8)], "T=1,d_out=1": [(2, 4), (1, 1), (2, 7), (1, 1)]}
        b, t, d_in, d_out = sizes(rng, ranges[shape], avoid={1: seen})
        d_out = d_in if shape == "square" else d_out
        x = rng.normal(size=(b, t, d_in))
        x = view(x, (1, 0, 2)) if strided else x  # (B, T, d_in) read from a (T, B, d_in) buffer
    seen.add(t)
    w = rng.normal(size=(d_in, d_out))
    bias = {"given": (rng.normal(size=d_out),), "None": (None,), "omitted": ()}[b_arg]
    return Case(fn, NAMES[fn], (x, w, *bias))


WORKED_LINEAR = {  # the prompts' worked examples: (x, w, b, answer)
    "project": (np.array([[[1.0, 2.0, 3.0]]]), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                np.array([10.0, 20.0]), np.array([[[4.0, 5.0]]])),
    "output_projection": (np.array([[[1.0, 2.0, 3.0, 4.0]]]), np.arange(12.0).reshape(4, 3),
                          np.array([1.0, 2.0, 3.0]), np.array([[[60.0, 70.0, 80.0]]])),
}


def linear_cases(rng, fn: str, bias: bool, unbatched: bool) -> list[Case]:
    """Kinds: :data:`KINDS` (test_project_values / _bias, test_output_projection_values / _bias).
    Three discriminating batched calls (the second reads x through a transposed view), one unbatched
    if the prompt allows it; then a square w, B = 1 with d_in = 1, T = 1 with d_out = 1, and the
    worked example. Without bias, b is left out or passed as None; with bias, one domain call passes None."""
    seen: set = set()
    plain = ["omitted", "None", "omitted"]
    cases = [_linear(rng, fn, "given" if bias else plain[i], strided=i == 1, seen=seen) for i in range(3)]
    if unbatched:
        cases.append(_linear(rng, fn, "given" if bias else "None", "unbatched", seen=seen))
    cases += [_linear(rng, fn, "None" if bias else "omitted", "square", seen=seen),
              _linear(rng, fn, "given" if bias else "None", "B=1,d_in=1", seen=seen),
              _linear(rng, fn, "given" if bias else "omitted", "T=1,d_out=1", seen=seen)]
    x, w, b, answer = WORKED_LINEAR[fn]
    worked = Case(fn, NAMES[fn], (x, w, b), expected=answer + b) if bias else \
        Case(fn, NAMES[fn], (x, w), expected=answer)
    return cases + [worked]


# --- exercise 1, part B: fuse_heads ------------------------------------------------------------------

def fuse_cases(rng) -> list[Case]:
    """Kinds: KINDS["test_fuse_heads"]. Three discriminating calls (biases given, given with the heads
    as transposed views, None); then one head on one input feature (biases left out), heads of width
    one whose fused matrix is square (d = h), and the visible test's example."""
    cases, seen = [], set()
    shapes = [None, None, None, "h=1,d=1", "d_k=1,square"]
    for i, (b_arg, shape) in enumerate(zip(("given", "given", "None", "omitted", "given"), shapes)):
        if shape == "h=1,d=1":
            h, d, d_k = 1, 1, sizes(rng, [(2, 5)])[0]
        elif shape == "d_k=1,square":
            h, = sizes(rng, [(2, 5)], avoid={0: seen})
            d, d_k = h, 1
        else:
            h, d, d_k = sizes(rng, [(2, 4), (3, 6), (2 if i == 1 else 1, 5)], products=((0, 2),),
                              avoid={1: seen})  # (d, 1) is contiguous
        seen.add(d)
        w = [rng.normal(size=(d, d_k)) for _ in range(h)]
        w = [view(w_i, (1, 0)) for w_i in w] if i == 1 else w  # heads kept as (d_k, d) rows, transposed
        b = {"given": ([rng.normal(size=d_k) for _ in range(h)],), "None": (None,), "omitted": ()}[b_arg]
        cases.append(Case("fuse_heads", NAMES["fuse_heads"], (w, *b)))
    worked = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0], [7.0, 8.0]])]
    return cases + [Case("fuse_heads", NAMES["fuse_heads"], (worked,),
                         expected=(np.array([[1.0, 2.0, 5.0, 6.0], [3.0, 4.0, 7.0, 8.0]]), None))]


# --- exercises 2 and 3: split and merge ---------------------------------------------------------------

def split_cases(rng, check: str, n: int) -> list[Case]:
    """Kinds: KINDS["test_split_heads_shape"]. ``n`` discriminating calls (the second a view, the last
    with T a multiple of h, the others not); then B = 1 with one head, T = 1 with heads of width one
    (d = h), and the worked example."""
    cases, seen = [], set()
    for i in range(n):
        while True:
            b, t, h, d_k = sizes(rng, [(2, 4), (2, 9), (2, 5), (1, 5)], products=((2, 3),), avoid={1: seen})
            if (t % h == 0) == (i == n - 1):
                break
        seen.add(t)
        x = rng.normal(size=(b, t, h * d_k))
        cases.append(Case("split_heads", NAMES["split_heads"], (view(x, (1, 0, 2)) if i == 1 else x, h), check))
    for ranges in ([(1, 1), (2, 9), (1, 1), (2, 5)], [(2, 4), (1, 1), (2, 5), (1, 1)]):
        b, t, h, d_k = sizes(rng, ranges, avoid={1: seen})
        seen.add(t)
        cases.append(Case("split_heads", NAMES["split_heads"], (rng.normal(size=(b, t, h * d_k)), h), check))
    worked = np.array([[[[0.0, 1.0], [4.0, 5.0]], [[2.0, 3.0], [6.0, 7.0]]]])
    return cases + [Case("split_heads", NAMES["split_heads"], (np.arange(8.0).reshape(1, 2, 4), 2), check,
                         expected=worked)]


def merge_cases(rng, check: str, n: int) -> list[Case]:
    """Kinds: KINDS["test_merge_heads_values"]. ``n`` discriminating calls, the first a transposed view
    (what split_heads returns); for values, merge undoing split; then B = 1 with one head, T = 1 with
    heads of width one, and the worked example."""
    cases, seen = [], set()
    for i in range(n):
        shape = sizes(rng, [(2, 4), (2, 5), (2, 7), (1, 5)], products=((1, 3),), avoid={2: seen})
        seen.add(shape[2])
        x = rng.normal(size=shape)
        cases.append(Case("merge_heads", NAMES["merge_heads"], (view(x, (0, 2, 1, 3)) if i == 0 else x,), check))
    if check == "values":  # merge undoes split: the heads are split_heads's own view
        b, t, h, d_k = sizes(rng, [(2, 3), (4, 8), (2, 3), (2, 5)], products=((2, 3),), avoid={1: seen})
        seen.add(t)
        x = rng.normal(size=(b, t, h * d_k))
        heads = x.reshape(b, t, h, d_k).transpose(0, 2, 1, 3)  # (B, T, h, d_k) -> (B, h, T, d_k), a view
        cases.append(Case("merge_heads", NAMES["merge_heads"], (heads,), check, expected=x))
    for ranges in ([(1, 1), (1, 1), (2, 7), (2, 5)], [(2, 4), (2, 5), (1, 1), (1, 1)]):
        shape = sizes(rng, ranges, avoid={2: seen})
        seen.add(shape[2])
        cases.append(Case("merge_heads", NAMES["merge_heads"], (rng.normal(size=shape),), check))
    return cases + [Case("merge_heads", NAMES["merge_heads"], (np.arange(8.0).reshape(1, 2, 2, 2),), check,
                         expected=np.array([[[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0]]]))]


# --- exercise 4, part B: the output projection head by head ---------------------------------------------

def per_head_cases(rng) -> list[Case]:
    """Kinds: KINDS["test_output_projection_per_head"]. Three discriminating calls (the first a view);
    then a square W^O with b_o = None, B = 1 with one head and one output feature, T = 1 with heads of
    width one and b_o left out, and the worked example (b_o left out, as in the prompt)."""
    cases, seen = [], set()
    shapes = [None, None, None, "square", "B=1,h=1,d_model=1", "T=1,d_v=1"]
    for i, (shape, b_arg) in enumerate(zip(shapes, ("given",) * 3 + ("None", "given", "omitted"))):
        ranges = {None: [(2, 3), (2, 4), (3, 7), (1, 4), (2, 7)], "square": [(2, 3), (2, 4), (3, 7), (1, 4), (2, 7)],
                  "B=1,h=1,d_model=1": [(1, 1), (1, 1), (3, 7), (2, 4), (1, 1)],
                  "T=1,d_v=1": [(2, 3), (2, 4), (1, 1), (1, 1), (2, 7)]}[shape]
        b, h, t, d_v, d_model = sizes(rng, ranges, products=((1, 3),) if shape is None else (), avoid={2: seen})
        d_model = h * d_v if shape == "square" else d_model
        seen.add(t)
        heads = rng.normal(size=(b, h, t, d_v))
        bias = {"given": (rng.normal(size=d_model),), "None": (None,), "omitted": ()}[b_arg]
        cases.append(Case("output_projection_per_head", NAMES["output_projection_per_head"],
                          (view(heads, (0, 2, 1, 3)) if i == 0 else heads, rng.normal(size=(h * d_v, d_model)),
                           *bias)))
    return cases + [Case("output_projection_per_head", NAMES["output_projection_per_head"],
                         (np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]]), np.arange(12.0).reshape(4, 3)),
                         expected=np.array([[[60.0, 70.0, 80.0]]]))]


# --- exercise 5 ------------------------------------------------------------------------------------------

def random_mha(rng, d_model: int, h: int) -> MhaWeights:
    """Weights AND biases random (torch starts biases at 0, which would hide a forgotten bias)."""
    scale = 1 / np.sqrt(d_model)
    shapes = {"in_proj_weight": (3 * d_model, d_model), "in_proj_bias": (3 * d_model,),
              "out_proj_weight": (d_model, d_model), "out_proj_bias": (d_model,)}
    return MhaWeights(d_model, h, {k: (rng.normal(size=s) * scale).astype(MHA_DTYPE) for k, s in shapes.items()})


def _tensor(rng, shape, strided: bool) -> calling.Tensor:
    x = rng.normal(size=shape).astype(MHA_DTYPE)
    return calling.Tensor(view(x, (1, 0, 2)) if strided else x)  # (B, T, d) read from a (T, B, d) buffer


def mha_case(rng, cross: bool, causal: bool | None, check: str = "values", order: str = "", strided: bool = False,
             seen: set | None = None, fixed: dict | None = None, shared_kv: bool = False) -> Case:
    """B, T_q, T_k, h, d_k, d_model all different (T_q == T_k for self-attention). ``order`` fixes how
    T_q compares with T_k in cross-attention ("<" or ">"); ``seen`` holds the lengths the cell's other
    calls used (none is used again; this call's are added); ``fixed`` sets some sizes (a domain call:
    {"B": 1, "h": 1}, ...); ``shared_kv``: key and value are one tensor; ``causal=None``: the call leaves
    causal out (the prompt's default, False)."""
    seen = set() if seen is None else seen
    fixed = fixed or {}
    names = ["B", "T_q", "T_k", "h", "d_k"] if cross else ["B", "T_q", "h", "d_k"]
    top = _top(12 if cross else 8, seen, cross, fixed)
    default = {"B": (2, 3), "T_q": (2, top), "T_k": (2, top), "h": (2, 5), "d_k": (2, 5)}
    ranges = [(fixed[n], fixed[n]) if n in fixed else default[n] for n in names]
    while True:
        drawn = dict(zip(names, sizes(rng, ranges, products=((3, 4),) if cross else ((2, 3),),
                                      avoid={1: seen, 2: seen} if cross else {1: seen})))
        b, t_q, h, d_k = drawn["B"], drawn["T_q"], drawn["h"], drawn["d_k"]
        t_k = drawn.get("T_k", t_q)
        if h == d_k * d_k and h > 1:  # sqrt(h) would equal sqrt(d_k)**2 = d_k: a wrong scale could not be told apart
            continue
        if cross and abs(t_q - t_k) < 2 and not {"T_q", "T_k"} & set(fixed):
            continue  # a mask aligned to the last key would equal tril(1) or tril(-1)
        if (order == "<" and t_q > t_k) or (order == ">" and t_q < t_k):
            if {"T_q", "T_k"} & set(fixed):
                continue
            t_q, t_k = t_k, t_q
        break
    seen.update({t_q, t_k} - {1})
    d = h * d_k
    query = _tensor(rng, (b, t_q, d), strided)
    if cross:
        key = _tensor(rng, (b, t_k, d), strided)
        value = key if shared_kv else _tensor(rng, (b, t_k, d), strided)
    else:
        key = value = query
    mask = () if causal is None else (causal,)
    return Case("multi_head_attention", NAMES["multi_head_attention"],
                (query, key, value, random_mha(rng, d, h), *mask), check)


def worked_example_mha(check: str = "values") -> Case:
    """Exercise 5's worked example (see mha_checks.visible.worked_example_mha) with its stated answer."""
    w = np.zeros((12, 4), dtype=MHA_DTYPE)
    w[8:] = np.eye(4)
    weights = {"in_proj_weight": w, "in_proj_bias": np.zeros(12, dtype=MHA_DTYPE),
               "out_proj_weight": np.eye(4, dtype=MHA_DTYPE),
               "out_proj_bias": np.array([0.5, -0.5, 1.0, -1.0], dtype=MHA_DTYPE)}
    x = calling.Tensor(np.arange(1.0, 13.0, dtype=MHA_DTYPE).reshape(1, 3, 4))
    rows = np.array([[1.0, 0.0, 0.0], [1 / 2, 1 / 2, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    out = np.array([[[1.5, 1.5, 4.0, 3.0], [3.5, 3.5, 6.0, 5.0], [5.5, 5.5, 8.0, 7.0]]])
    return Case("multi_head_attention", NAMES["multi_head_attention"], (x, x, x, MhaWeights(4, 2, weights), True),
                check, expected=(out, np.broadcast_to(rows, (1, 2, 3, 3)).copy()))


def _top(top: int, seen: set, cross: bool, fixed: dict) -> int:
    """The longest length a call may draw: ``top``, or past it as far as needed for a draw to exist (a cell of
    many calls can use every length up to ``top`` that fits its other sizes, and the draw would never end)."""
    while not _drawable(top, seen, cross, fixed):
        top += 1
    return top


def _drawable(top: int, seen: set, cross: bool, fixed: dict) -> bool:
    """Whether :func:`mha_case`'s rules admit some sizes with lengths up to ``top``: a free length always fits
    self-attention (B, h and d_k find values beside it); cross-attention needs two lengths at least 2 apart,
    checked among every choice when two free ones past 5 (every B, h, d_k) do not settle it."""
    free = [v for v in range(2, top + 1) if v not in seen]
    longer = [v for v in free if v > 5]
    if not cross or {"T_q", "T_k"} & set(fixed):
        return bool(free)
    if longer and max(longer) - min(longer) >= 2:
        return True
    rng = {n: [fixed[n]] if n in fixed else list(range(lo, hi + 1)) for n, (lo, hi) in
           {"B": (2, 3), "h": (2, 5), "d_k": (2, 5)}.items()}
    for b, h, d_k, t_q, t_k in itertools.product(rng["B"], rng["h"], rng["d_k"], free, free):
        drawn = [t_q, t_k] + [x for n, x in (("B", b), ("h", h), ("d_k", d_k)) if n not in fixed]
        extra = [h * d_k] if not {"h", "d_k"} & set(fixed) else []
        if abs(t_q - t_k) >= 2 and not (h == d_k * d_k and h > 1) and len(set(drawn + extra)) == len(drawn) + len(extra):
            return True
    return False


def mha_cases(rng, calls: list[dict], check: str = "values", worked: bool = False) -> list[Case]:
    """One cell's calls of exercise 5 (each a dict of :func:`mha_case`'s options), no length used twice;
    then the worked example if asked."""
    seen: set = set()
    return [mha_case(rng, check=check, seen=seen, **c) for c in calls] + ([worked_example_mha(check)] if worked else [])


ONE_HEAD = {"B": 1, "h": 1}           # a batch of one, one head of width d_model
ONE_QUERY = {"T_q": 1, "d_k": 1}      # one query (one position in self-attention), heads of width one
CROSS = [{"cross": True, "causal": False, "order": "<"},
         {"cross": True, "causal": False, "order": ">", "strided": True},  # query, key, value: views
         {"cross": True, "causal": True, "order": ">"}, {"cross": True, "causal": True, "order": "<"},
         {"cross": True, "causal": True, "fixed": {**ONE_HEAD, "T_k": 1}},
         {"cross": True, "causal": None, "fixed": ONE_QUERY, "shared_kv": True}]
MAKERS = {  # grade cell -> rng -> cases (kinds: KINDS[grade cell])
    "test_project_values": lambda rng: linear_cases(rng, "project", False, unbatched=True),
    "test_project_bias": lambda rng: linear_cases(rng, "project", True, unbatched=True),
    "test_fuse_heads": fuse_cases,
    "test_split_heads_shape": lambda rng: split_cases(rng, "shape", 4),
    "test_split_heads_values": lambda rng: split_cases(rng, "values", 3),
    "test_merge_heads_shape": lambda rng: merge_cases(rng, "shape", 4),
    "test_merge_heads_values": lambda rng: merge_cases(rng, "values", 3),
    "test_output_projection_values": lambda rng: linear_cases(rng, "output_projection", False, unbatched=False),
    "test_output_projection_bias": lambda rng: linear_cases(rng, "output_projection", True, unbatched=False),
    "test_output_projection_per_head": per_head_cases,
    "test_mha_shapes": lambda rng: mha_cases(rng, [
        {"cross": True, "causal": False, "order": ">"}, {"cross": True, "causal": False, "order": "<"},
        {"cross": False, "causal": False}, {"cross": True, "causal": True, "fixed": {**ONE_HEAD, "T_k": 1}},
        {"cross": True, "causal": None, "fixed": ONE_QUERY}], "shape"),
    "test_mha_weights": lambda rng: mha_cases(rng, [
        {"cross": False, "causal": True}, {"cross": False, "causal": True},
        {"cross": True, "causal": True, "order": ">"}, {"cross": True, "causal": True, "order": "<"},
        {"cross": False, "causal": False, "fixed": ONE_HEAD},
        {"cross": False, "causal": True, "fixed": ONE_QUERY}, {"cross": False, "causal": None}], "weights",
        worked=True),
    "test_mha_self_attention": lambda rng: mha_cases(rng, [{"cross": False, "causal": False}] * 3 + [
        {"cross": False, "causal": None, "fixed": ONE_HEAD}, {"cross": False, "causal": False, "fixed": ONE_QUERY}]),
    "test_mha_causal": lambda rng: mha_cases(rng, [{"cross": False, "causal": True}] * 3 + [
        {"cross": False, "causal": True, "fixed": ONE_HEAD}, {"cross": False, "causal": True, "fixed": ONE_QUERY}],
        worked=True),
    "test_mha_cross": lambda rng: mha_cases(rng, CROSS),
}


def hidden_cases(grade_id: str, rng: np.random.Generator) -> list[Case]:
    """The hidden cases of one grade cell (KeyError for an unknown grade_id)."""
    if grade_id not in MAKERS:
        raise KeyError(f"no hidden cases for grade cell {grade_id!r}")
    return MAKERS[grade_id](rng)


# --- exercises 6 and 7: the decoder's attention ------------------------------------------------------------
#
# Kinds of input (KINDS below) and how each cell's calls draw them. Sizes all different within each
# discriminating call, lengths never reused within a cell, and both float32 and float64 in every cell (the
# prompts allow any float dtype: the answer is held to its own dtype's tolerance). A 4-d tensor that is a view
# is read from a (B, T, h, d) buffer, as a split into heads leaves it; a 3-d one from a (T, B, d) buffer.

DECODER_CELLS = {
    "test_causal_attention_square": "06_kv_cache", "test_causal_attention_last": "06_kv_cache",
    "test_decode_step_empty_cache": "06_kv_cache", "test_decode_step_cached": "06_kv_cache",
    "test_generate_one_layer": "06_kv_cache", "test_generate": "06_kv_cache",
    "test_repeat_kv": "07_grouped_query", "test_gqa_shapes": "07_grouped_query",
    "test_gqa_values": "07_grouped_query", "test_gqa_causal": "07_grouped_query",
}
GRADE_CELLS.update(DECODER_CELLS)
NAMES.update({"causal_attention": ("q", "k", "v"), "decode_step": ("x", "cache", "attn"),
              "generate": ("prompt", "decoder", "steps"), "repeat_kv": ("x", "num_heads"),
              "grouped_query_attention": ("q", "k", "v", "causal")})
_DTYPES = {"float32": "inputs and weights in float32", "float64": "inputs and weights in float64"}
_ONES = {"B=1": "a batch of one", "h=1": "one head", "d_k=1": "heads of width one"}
KINDS.update({
    "test_causal_attention_square": {**_DTYPES, **_ONES, "T_q=T_k": "as many queries as keys (exercise 5's mask)",
                                     "T=1": "one position", "view": "q, k, v are transposed views",
                                     "d_v=1": "values of width one",
                                     "worked example": "the prompt's first worked example, with its stated answer"},
    "test_causal_attention_last": {**_DTYPES, **_ONES, "T_q<T_k": "fewer queries than keys: the last positions",
                                   "T_q=1": "one query, the newest position (a decode step)",
                                   "T_k=1": "one key (and so one query)", "view": "q, k, v are transposed views",
                                   "worked example": "the prompt's second worked example, with its stated answer"},
    "test_decode_step_empty_cache": {**_DTYPES, **_ONES, "empty cache": "a cache of 0 positions (a prompt)",
                                     "T_new=1": "a prompt of one position", "view": "x is a transposed view"},
    "test_decode_step_cached": {**_DTYPES, **_ONES, "T_new=1": "one new position (a decode step)",
                                "T_new>1": "several new positions at once", "T_cached=1": "one cached position",
                                "view": "x and the cache are transposed views"},
    "test_generate_one_layer": {**_DTYPES, **_ONES, "one layer": "a decoder of one block",
                                "T_p=1": "a prompt of one vector", "steps=1": "one step: the prompt's output alone"},
    "test_generate": {**_DTYPES, "B=1": "a batch of one", "h=1": "one head", "layers>1": "several blocks",
                      "T_p=1": "a prompt of one vector", "steps=1": "one step: the prompt's output alone"},
    "test_repeat_kv": {**_DTYPES, "1<g<h": "grouped: several groups, several heads each", "g=1": "one group "
                       "(multi-query)", "g=h": "a group per head (multi-head)", "B=1": "a batch of one",
                       "T=1": "one position", "d=1": "width one", "view": "x is a transposed view",
                       "worked example": "the prompt's worked example, with its stated answer"},
})
_GROUPS = {"1<g<h": "grouped-query", "g=1": "multi-query", "g=h": "multi-head"}
KINDS.update({
    "test_gqa_shapes": {**_DTYPES, **_GROUPS, "causal": "causal=True", "not causal": "causal=False",
                        "causal omitted": "causal left at its default, False", "T_q<T_k": "", "T_q>T_k": "not causal",
                        "T_q=1": "one query", "T_k=1": "one key"},
    "test_gqa_values": {**_DTYPES, **_GROUPS, **_ONES, "not causal": "causal=False",
                        "causal omitted": "causal left at its default, False", "T_q<T_k": "", "T_q>T_k": "",
                        "T_q=1": "one query", "view": "q, k, v are transposed views"},
    "test_gqa_causal": {**_DTYPES, **_GROUPS, "B=1": "a batch of one", "d_k=1": "heads of width one",
                        "T_q=T_k": "", "T_q<T_k": "the queries are the last positions", "T_q=1": "one query",
                        "view": "q, k, v are transposed views",
                        "worked example": "the prompt's worked example, with its stated answer"},
})


def _tensor_of(rng, shape, dtype, strided: bool = False) -> calling.Tensor:
    """A tensor argument; ``strided``: a transposed view (4-d: of a (B, T, h, d) buffer; 3-d: (T, B, d))."""
    x = rng.normal(size=shape).astype(dtype)
    if strided:
        x = view(x, (0, 2, 1, 3) if x.ndim == 4 else (1, 0, 2))
    return calling.Tensor(x)


def _draw(rng, ranges: dict, fixed: dict, seen: set, lengths: tuple, products=(), accept=lambda s: True) -> dict:
    """Sizes named as ``ranges``' keys, all different but the fixed ones, the ``lengths`` none of ``seen``
    (then added to it, but 1); ``accept`` may refuse a draw."""
    names = list(ranges)
    spans = [(fixed[n], fixed[n]) if n in fixed else ranges[n] for n in names]
    idx = [(names.index(a), names.index(b)) for a, b in products]
    while True:
        drawn = dict(zip(names, sizes(rng, spans, tuple(idx), avoid={names.index(n): seen for n in lengths})))
        if accept(drawn):
            seen.update(drawn[n] for n in lengths if drawn[n] > 1)
            return drawn


def causal_attention_case(rng, dtype, order: str, seen: set, fixed: dict | None = None, strided: bool = False):
    """q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v); ``order`` "=" (T_q = T_k) or "<"."""
    fixed = dict(fixed or {})
    if order == "=":
        if "T" in fixed:
            fixed["T_q"] = fixed["T_k"] = fixed.pop("T")
        ranges = {"B": (2, 3), "h": (2, 4), "T_q": (2, 12), "d_k": (2, 5), "d_v": (2, 6)}
        s = _draw(rng, ranges, fixed, seen, ("T_q",))
        s["T_k"] = s["T_q"]
    else:
        ranges = {"B": (2, 3), "h": (2, 4), "T_q": (2, 8), "T_k": (3, 14), "d_k": (2, 5), "d_v": (2, 6)}
        s = _draw(rng, ranges, fixed, seen, ("T_q", "T_k"),
                  accept=lambda d: (d["T_q"] < d["T_k"] or "T_k" in fixed and d["T_q"] <= d["T_k"])
                  and (d["T_k"] - d["T_q"] >= 2 or {"T_q", "T_k"} & set(fixed)))
    b, h, t_q, t_k, d_k, d_v = (s[n] for n in ("B", "h", "T_q", "T_k", "d_k", "d_v"))
    return Case("causal_attention", NAMES["causal_attention"],
                (_tensor_of(rng, (b, h, t_q, d_k), dtype, strided), _tensor_of(rng, (b, h, t_k, d_k), dtype, strided),
                 _tensor_of(rng, (b, h, t_k, d_v), dtype, strided)))


def causal_attention_worked(order: str) -> Case:
    """The prompts' worked examples: q = k = 0 (every allowed key gets the same weight), v = arange."""
    t_q, t_k = (3, 3) if order == "=" else (2, 4)
    f = np.float32
    q, k = np.zeros((1, 1, t_q, 2), f), np.zeros((1, 1, t_k, 2), f)
    v = np.arange(2.0 * t_k, dtype=f).reshape(1, 1, t_k, 2)
    allowed = np.tril(np.ones((t_q, t_k)), t_k - t_q)
    weights = allowed / allowed.sum(-1, keepdims=True)
    return Case("causal_attention", NAMES["causal_attention"], tuple(calling.Tensor(a) for a in (q, k, v)),
                expected=((weights @ v[0, 0])[None, None], weights[None, None]))


def random_attn(rng, d_model: int, h: int, dtype) -> AttnWeights:
    """One decoder layer's attention weights (W^Q, W^K, W^V, W^O as (d_out, d_in)), biases random too."""
    scale = 1 / np.sqrt(d_model)
    return AttnWeights(d_model, h, {f"{p}_{w}": (rng.normal(size=(d_model, d_model) if w == "weight" else d_model)
                                                 * scale).astype(dtype)
                                    for p in ("q_proj", "k_proj", "v_proj", "out_proj") for w in ("weight", "bias")})


def decode_step_case(rng, dtype, cached: bool, seen: set, fixed: dict | None = None, strided: bool = False) -> Case:
    """x (B, T_new, d_model), cache (keys, values) (B, h, T_cached, d_k) each (T_cached = 0: an empty cache)."""
    fixed = dict(fixed or {})
    ranges = {"B": (2, 3), "T_new": (2, 12), "T_cached": (2, 16) if cached else (0, 0), "h": (2, 4), "d_k": (2, 5)}
    if not cached:
        fixed["T_cached"] = 0
    s = _draw(rng, ranges, fixed, seen, ("T_new", "T_cached") if cached else ("T_new",), products=(("h", "d_k"),))
    b, t_new, t_c, h, d_k = (s[n] for n in ("B", "T_new", "T_cached", "h", "d_k"))
    x = _tensor_of(rng, (b, t_new, h * d_k), dtype, strided)
    cache = [_tensor_of(rng, (b, h, t_c, d_k), dtype, strided and t_c > 1) for _ in range(2)]
    return Case("decode_step", NAMES["decode_step"], (x, cache, random_attn(rng, h * d_k, h, dtype)))


def random_decoder(rng, layers: int, d_model: int, h: int, d_ff: int, dtype) -> DecoderWeights:
    """A pre-norm decoder's weights: every bias and every LayerNorm scale and offset random."""
    def norm(prefix):
        return {f"{prefix}_weight": (1 + 0.3 * rng.normal(size=d_model)).astype(dtype),
                f"{prefix}_bias": (0.3 * rng.normal(size=d_model)).astype(dtype)}

    def linear(prefix, d_out, d_in):
        return {f"{prefix}_weight": (rng.normal(size=(d_out, d_in)) / np.sqrt(d_in)).astype(dtype),
                f"{prefix}_bias": (0.3 * rng.normal(size=d_out)).astype(dtype)}
    blocks = tuple({"attn": random_attn(rng, d_model, h, dtype), **norm("norm1"), **norm("norm2"),
                    **linear("linear1", d_ff, d_model), **linear("linear2", d_model, d_ff)} for _ in range(layers))
    final = {k.split("_", 1)[1]: v for k, v in norm("final").items()}
    return DecoderWeights(blocks, final)


def generate_case(rng, dtype, seen: set, fixed: dict | None = None) -> Case:
    """prompt (B, T_p, d_model), a decoder of ``layers`` blocks, ``steps`` vectors to generate."""
    ranges = {"B": (2, 3), "T_p": (2, 7), "steps": (2, 7), "layers": (2, 3), "h": (2, 5), "d_k": (2, 6)}
    s = _draw(rng, ranges, fixed or {}, seen, ("T_p",), products=(("h", "d_k"),))
    d_model = s["h"] * s["d_k"]
    prompt = _tensor_of(rng, (s["B"], s["T_p"], d_model), dtype)
    decoder = random_decoder(rng, s["layers"], d_model, s["h"], int(rng.integers(3, 10)), dtype)
    return Case("generate", NAMES["generate"], (prompt, decoder, s["steps"]))


def repeat_kv_case(rng, dtype, seen: set, fixed: dict | None = None, strided: bool = False) -> Case:
    """x (B, g, T, d), num_heads h = g * r."""
    fixed = dict(fixed or {})
    ranges = {"B": (2, 3), "g": (2, 4), "r": (2, 4), "T": (2, 9), "d": (2, 6)}
    s = _draw(rng, ranges, fixed, seen, ("T",), products=(("g", "r"),),
              accept=lambda d: len({d["B"], d["g"] * d["r"], d["T"], d["d"]}) == 4 or bool(fixed))
    x = _tensor_of(rng, (s["B"], s["g"], s["T"], s["d"]), dtype, strided)
    return Case("repeat_kv", NAMES["repeat_kv"], (x, s["g"] * s["r"]))


def gqa_case(rng, dtype, causal: bool | None, order: str, seen: set, fixed: dict | None = None,
             strided: bool = False, check: str = "values") -> Case:
    """q (B, h, T_q, d_k), k (B, g, T_k, d_k), v (B, g, T_k, d_v), h = g * r; ``order`` how T_q compares with
    T_k ("<", ">" or "="); ``causal=None``: left out."""
    fixed = dict(fixed or {})
    ranges = {"B": (2, 3), "g": (2, 4), "r": (2, 4), "T_q": (2, 14), "T_k": (2, 14), "d_k": (2, 6), "d_v": (2, 7)}
    if order == "=":
        ranges.pop("T_k")

    def accept(d):
        t_q, t_k = d["T_q"], d.get("T_k", d["T_q"])
        h = d["g"] * d["r"]
        ok = {"<": t_q < t_k, ">": t_q > t_k, "=": True}[order]
        apart = abs(t_k - t_q) >= 2 or order == "=" or {"T_q", "T_k"} & set(fixed)
        distinct = fixed or len({d["B"], h, d["g"], t_q, t_k, d["d_k"], d["d_v"]}) == 7 - (order == "=")
        return ok and apart and distinct and (d["r"] != d["g"] or "r" in fixed or "g" in fixed)
    s = _draw(rng, ranges, fixed, seen, ("T_q",) if order == "=" else ("T_q", "T_k"), products=(("g", "r"),),
              accept=accept)
    t_k = s.get("T_k", s["T_q"])
    b, g, h, t_q, d_k, d_v = s["B"], s["g"], s["g"] * s["r"], s["T_q"], s["d_k"], s["d_v"]
    args = (_tensor_of(rng, (b, h, t_q, d_k), dtype, strided), _tensor_of(rng, (b, g, t_k, d_k), dtype, strided),
            _tensor_of(rng, (b, g, t_k, d_v), dtype, strided))
    return Case("grouped_query_attention", NAMES["grouped_query_attention"],
                args + (() if causal is None else (causal,)), check)


def gqa_worked() -> Case:
    """The prompt's worked example: h = 2 heads, g = 1 group, q = k = 0, v = arange, causal, T_q = 2 < T_k = 3."""
    f = np.float32
    q, k = np.zeros((1, 2, 2, 2), f), np.zeros((1, 1, 3, 2), f)
    v = np.arange(6.0, dtype=f).reshape(1, 1, 3, 2)
    weights = np.array([[1 / 2, 1 / 2, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    out = weights @ v[0, 0]
    return Case("grouped_query_attention", NAMES["grouped_query_attention"],
                (*(calling.Tensor(a) for a in (q, k, v)), True),
                expected=(np.broadcast_to(out, (1, 2, 2, 2)).copy(), np.broadcast_to(weights, (1, 2, 2, 3)).copy()))


REPEAT_WORKED = Case("repeat_kv", ("x", "num_heads"), (calling.Tensor(np.array([1.0, 2.0], np.float32).reshape(1, 2, 1, 1)), 4),
                     expected=np.array([1.0, 1.0, 2.0, 2.0]).reshape(1, 4, 1, 1))
F32, F64 = np.float32, np.float64


def _calls(maker, calls: list[dict], extra: list | None = None) -> list[Case]:
    """One cell's calls, sharing the lengths already used (``seen``), then its fixed cases."""
    seen: set = set()
    return [maker(seen=seen, **c) for c in calls] + (extra or [])


MAKERS.update({
    "test_causal_attention_square": lambda rng: _calls(lambda **k: causal_attention_case(rng, order="=", **k), [
        {"dtype": F32}, {"dtype": F64, "strided": True}, {"dtype": F32},
        {"dtype": F64, "fixed": {"B": 1, "h": 1}}, {"dtype": F32, "fixed": {"T": 1, "d_k": 1}},
        {"dtype": F64, "fixed": {"d_v": 1}}], [causal_attention_worked("=")]),
    "test_causal_attention_last": lambda rng: _calls(lambda **k: causal_attention_case(rng, order="<", **k), [
        {"dtype": F32}, {"dtype": F64, "strided": True}, {"dtype": F32},
        {"dtype": F64, "fixed": {"T_q": 1}}, {"dtype": F32, "fixed": {"T_q": 1, "T_k": 1, "B": 1, "h": 1}},
        {"dtype": F64, "fixed": {"d_k": 1}}], [causal_attention_worked("<")]),
    "test_decode_step_empty_cache": lambda rng: _calls(lambda **k: decode_step_case(rng, cached=False, **k), [
        {"dtype": F32}, {"dtype": F64, "strided": True}, {"dtype": F32},
        {"dtype": F64, "fixed": {"T_new": 1, "B": 1}}, {"dtype": F32, "fixed": {"h": 1}},
        {"dtype": F64, "fixed": {"d_k": 1}}]),
    "test_decode_step_cached": lambda rng: _calls(lambda **k: decode_step_case(rng, cached=True, **k), [
        {"dtype": F32}, {"dtype": F64, "strided": True}, {"dtype": F32},
        {"dtype": F32, "fixed": {"T_new": 1}}, {"dtype": F64, "fixed": {"T_new": 1, "B": 1, "h": 1}},
        {"dtype": F32, "fixed": {"T_cached": 1, "d_k": 1}}]),
    "test_generate_one_layer": lambda rng: _calls(lambda **k: generate_case(rng, **k), [
        {"dtype": F32, "fixed": {"layers": 1}}, {"dtype": F64, "fixed": {"layers": 1}},
        {"dtype": F32, "fixed": {"layers": 1, "T_p": 1, "B": 1}}, {"dtype": F64, "fixed": {"layers": 1, "steps": 1,
                                                                                            "h": 1}},
        {"dtype": F32, "fixed": {"layers": 1, "d_k": 1}}]),
    "test_generate": lambda rng: _calls(lambda **k: generate_case(rng, **k), [
        {"dtype": F64}, {"dtype": F32}, {"dtype": F64, "fixed": {"T_p": 1, "h": 1}},
        {"dtype": F32, "fixed": {"steps": 1, "B": 1}}]),
    "test_repeat_kv": lambda rng: _calls(lambda **k: repeat_kv_case(rng, **k), [
        {"dtype": F32}, {"dtype": F64, "strided": True}, {"dtype": F32},
        {"dtype": F64, "fixed": {"g": 1, "B": 1}}, {"dtype": F32, "fixed": {"r": 1, "T": 1}},
        {"dtype": F64, "fixed": {"d": 1}}], [REPEAT_WORKED]),
    "test_gqa_shapes": lambda rng: _calls(lambda **k: gqa_case(rng, check="shape", **k), [
        {"dtype": F32, "causal": False, "order": ">"}, {"dtype": F64, "causal": True, "order": "<"},
        {"dtype": F32, "causal": None, "order": "<"},
        {"dtype": F64, "causal": True, "order": "<", "fixed": {"g": 1, "T_q": 1}},
        {"dtype": F32, "causal": False, "order": "=", "fixed": {"r": 1, "T_q": 1}},
        {"dtype": F64, "causal": False, "order": ">", "fixed": {"T_k": 1}}]),
    "test_gqa_values": lambda rng: _calls(lambda **k: gqa_case(rng, **k), [
        {"dtype": F32, "causal": False, "order": "<"}, {"dtype": F64, "causal": False, "order": ">", "strided": True},
        {"dtype": F32, "causal": None, "order": "<"},
        {"dtype": F64, "causal": False, "order": "<", "fixed": {"g": 1, "B": 1}},
        {"dtype": F32, "causal": None, "order": ">", "fixed": {"r": 1, "d_k": 1}},
        {"dtype": F64, "causal": False, "order": "<", "fixed": {"g": 1, "r": 1, "T_q": 1}}]),
    "test_gqa_causal": lambda rng: _calls(lambda **k: gqa_case(rng, causal=True, **k), [
        {"dtype": F32, "order": "<"}, {"dtype": F64, "order": "=", "strided": True}, {"dtype": F32, "order": "<"},
        {"dtype": F64, "order": "<", "fixed": {"T_q": 1, "g": 1}}, {"dtype": F32, "order": "=", "fixed": {"r": 1, "B": 1}},
        {"dtype": F64, "order": "<", "fixed": {"d_k": 1}}], [gqa_worked()]),
})
