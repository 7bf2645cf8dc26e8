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
    default = {"B": (2, 3), "T_q": (2, 12) if cross else (2, 8), "T_k": (2, 12), "h": (2, 5), "d_k": (2, 5)}
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
