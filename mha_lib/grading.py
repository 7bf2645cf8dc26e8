"""The checks behind the course's nbgrader exercises: every failure is one plain sentence.

Each grade cell of ``solutions/mha/*.ipynb`` calls a ``check_*`` function once per case. It runs
the student's function, refuses a ready-made answer (any call into ``mha_lib``, or into torch's
own attention), compares the result with :mod:`mha_lib.reference` (or with
``torch.nn.MultiheadAttention``) and, when it is wrong, says how:

* a wrong shape is spelled out axis by axis: ``expected (B, h, T, d_k) = (2, 3, 5, 4)``;
* a wrong value is *diagnosed*: every known mistake (a :class:`Pitfall`, a deliberately wrong
  implementation plus a hint) runs on the same inputs, and the one the result equals is named.

The catalogues of pitfalls below are public on purpose: they are the course's list of classic
bugs. What the hidden tests keep to themselves is only their inputs (random, all-different
sizes, several seeds). The unit tests are ``tests/test_grading.py``.

Only NumPy is imported here; torch is imported by the attention checks alone (it costs a
second per graded notebook).
"""
import math
import os
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import reference


class Mistake(AssertionError):
    """A failed check. Its message is the whole feedback: what is wrong and how to fix it."""


@dataclass(frozen=True)
class Pitfall:
    """A known mistake: its name in plain words, a hint, and the mistake itself, implemented."""
    name: str
    hint: str
    fn: Callable


# --------------------------------------------------------------------------------------------
# The known mistakes. Each ``fn`` takes the same arguments as the student's function.
# --------------------------------------------------------------------------------------------

def _plus(y, b):
    return y if b is None else y + b


PROJECT_PITFALLS = [
    Pitfall("the bias was left out",
            "Add b after the product: x @ w + b (b is None only when no bias is given).",
            lambda x, w, b=None: x @ w),
    Pitfall("w used transposed (torch.nn.Linear's (d_out, d_in) layout)",
            "Here w is (d_in, d_out) and acts on the right: x @ w, no .T; x @ w.T only runs when w is square.",
            lambda x, w, b=None: _plus(x @ w.T, b)),
    Pitfall("an element-wise product instead of a matrix product",
            "x * w multiplies entry by entry; the projection is the matrix product x @ w.",
            lambda x, w, b=None: _plus(x * w, b)),
    Pitfall("the bias added before the product",
            "The bias has d_out entries and comes last: x @ w + b, not (x + b) @ w.",
            lambda x, w, b=None: (x if b is None else x + b) @ w),
]


def _fuse_columns(w_heads, b_heads):
    return np.concatenate(w_heads, axis=1), None if b_heads is None else np.concatenate(b_heads)


FUSE_HEADS_PITFALLS = [
    Pitfall("heads interleaved (stacked on a new last axis, then reshaped)",
            "Head i must own the contiguous columns i*d_k:(i+1)*d_k: put the (d, d_k) blocks side "
            "by side with np.concatenate(..., axis=1); np.stack + reshape mixes their columns.",
            lambda w_heads, b_heads=None: (np.stack(w_heads, axis=-1).reshape(w_heads[0].shape[0], -1),
                                           None if b_heads is None else np.stack(b_heads, -1).reshape(-1))),
    Pitfall("heads stacked as rows (axis 0) instead of side by side as columns",
            "The fused W keeps d rows (one per input feature) and gets h*d_k columns: concatenate along axis=1.",
            lambda w_heads, b_heads=None: (np.concatenate(w_heads, axis=0), _fuse_columns(w_heads, b_heads)[1])),
    Pitfall("heads summed instead of placed side by side",
            "Each head keeps its own output columns: concatenate the blocks, do not add them.",
            lambda w_heads, b_heads=None: (sum(w_heads), None if b_heads is None else sum(b_heads))),
    Pitfall("the biases were not fused",
            "Return the biases concatenated in the same order as the columns: shape (h*d_k,).",
            lambda w_heads, b_heads=None: (_fuse_columns(w_heads, None)[0], None)),
]


def _split_no_transpose(x, h):
    b, t, d = x.shape
    return x.reshape(b, h, t, d // h)


def _split_strided(x, h):
    b, t, d = x.shape
    return x.reshape(b, t, d // h, h).transpose(0, 3, 1, 2)


def _split_batch_time_mixed(x, h):
    b, t, d = x.shape
    return x.reshape(t, b, h, d // h).transpose(0, 2, 1, 3)  # the mistake: (T, B, ...) for (B, T, ...)


def _split_wrong_swap(x, h):
    b, t, d = x.shape
    return x.reshape(b, t, h, d // h).transpose(0, 2, 3, 1)


SPLIT_HEADS_PITFALLS = [
    Pitfall("reshape without transpose",
            "x.reshape(B, h, T, d_k) cuts the flat data in the wrong places: reshape to (B, T, h, d_k) "
            "first, then swap the T and h axes.",
            _split_no_transpose),
    Pitfall("heads interleaved (feature j sent to head j % h)",
            "Head i owns the contiguous features i*d_k:(i+1)*d_k: reshape the last axis as (h, d_k), not (d_k, h).",
            _split_strided),
    Pitfall("B and T mixed up in the reshape",
            "The input is batch-first, (B, T, d): reshape to (B, T, h, d_k) in that order; mixing B and T "
            "only works when B == T.",
            _split_batch_time_mixed),
    Pitfall("the wrong axes swapped (T and d_k end up exchanged)",
            "After reshaping to (B, T, h, d_k), swap only axes 1 and 2: (B, h, T, d_k).",
            _split_wrong_swap),
]


def _merge(x, order):
    b, h, t, d_v = x.shape
    return x.transpose(order).reshape(b, t, h * d_v)


MERGE_HEADS_PITFALLS = [
    Pitfall("reshape without transpose",
            "x.reshape(B, T, h*d_v) reads the heads' data in the wrong order: swap the h and T axes "
            "first (to (B, T, h, d_v)), then reshape.",
            lambda x: x.reshape(x.shape[0], x.shape[2], -1)),
    Pitfall("merged in the wrong axis order (d_v before h: features interleaved)",
            "Concat puts head 1's d_v features, then head 2's: transpose to (B, T, h, d_v), not (B, T, d_v, h).",
            lambda x: _merge(x, (0, 2, 3, 1))),
    Pitfall("heads averaged instead of concatenated",
            "Concat(head_1, ..., head_h) keeps every head: the result has h*d_v features, not d_v.",
            lambda x: x.mean(axis=1)),
    Pitfall("heads summed instead of concatenated",
            "Concat(head_1, ..., head_h) keeps every head: the result has h*d_v features, not d_v.",
            lambda x: x.sum(axis=1)),
    Pitfall("heads concatenated along time instead of features",
            "The heads go side by side along the last (feature) axis: (B, T, h*d_v), not (B, h*T, d_v).",
            lambda x: x.reshape(x.shape[0], -1, x.shape[-1])),
]

OUTPUT_PROJECTION_PITFALLS = [
    Pitfall("the output bias b_o was left out",
            "W^O is a full linear layer: x @ w_o + b_o.",
            lambda x, w_o, b_o=None: x @ w_o),
    Pitfall("W^O used transposed (torch.nn.Linear's (d_out, d_in) layout)",
            "Here w_o is (h*d_v, d_model) and acts on the right: x @ w_o; x @ w_o.T only runs when "
            "h*d_v == d_model.",
            lambda x, w_o, b_o=None: _plus(x @ w_o.T, b_o)),
    Pitfall("the bias added before W^O",
            "b_o has d_model entries and comes last: x @ w_o + b_o, not (x + b_o) @ w_o.",
            lambda x, w_o, b_o=None: (x if b_o is None else x + b_o) @ w_o),
    Pitfall("W^O was forgotten (the concatenated heads returned as they are)",
            "The concatenation still has to be mixed by W^O: return x @ w_o + b_o.",
            lambda x, w_o, b_o=None: x),
]


def _per_head_terms(heads, w_o):
    d_v = heads.shape[-1]
    return [heads[:, i] @ w_o[i * d_v:(i + 1) * d_v] for i in range(heads.shape[1])]


def _per_head_columns(heads, w_o, b_o=None):
    d_v = heads.shape[-1]
    return _plus(sum(heads[:, i] @ w_o[:, i * d_v:(i + 1) * d_v] for i in range(heads.shape[1])), b_o)


OUTPUT_PER_HEAD_PITFALLS = [
    Pitfall("heads averaged instead of summed",
            "Concat(head_1..head_h) W^O = head_1 W^O_1 + ... + head_h W^O_h: a sum, not a mean.",
            lambda heads, w_o, b_o=None: _plus(sum(_per_head_terms(heads, w_o)) / heads.shape[1], b_o)),
    Pitfall("the bias added once per head",
            "b_o belongs to the whole layer: add it once, after the sum over heads.",
            lambda heads, w_o, b_o=None: sum(_plus(t, b_o) for t in _per_head_terms(heads, w_o))),
    Pitfall("the output bias b_o was left out",
            "Add b_o once, after the sum over heads.",
            lambda heads, w_o, b_o=None: sum(_per_head_terms(heads, w_o))),
    Pitfall("column blocks of W^O instead of row blocks",
            "Head i meets the rows i*d_v:(i+1)*d_v of W^O (its features in the concatenation), "
            "and every head reaches all d_model output columns.",
            _per_head_columns),
    Pitfall("heads concatenated by a reshape without transpose",
            "If you concatenate first, swap the h and T axes before reshaping to (B, T, h*d_v).",
            lambda heads, w_o, b_o=None: _plus(heads.reshape(heads.shape[0], heads.shape[2], -1) @ w_o, b_o)),
]

# The attention mistakes, as switches of one torch implementation (see _attention).
ATTENTION_MISTAKES = {
    "scaled by sqrt(d_model) instead of sqrt(d_k)":
        "Each head's scores are q.k over d_k = d_model/h features: divide by sqrt(d_k), the head width.",
    "scores not scaled":
        "Divide the scores by sqrt(d_k) before the softmax, or it saturates as d_k grows.",
    "softmax over the wrong axis":
        "Each query's weights over the keys must sum to 1: softmax over the last axis (keys), dim=-1.",
    "mask applied after the softmax":
        "Mask the scores (-inf where a query may not look) before the softmax; zeroing weights after "
        "it leaves rows that no longer sum to 1.",
    "mask the wrong way round (the future kept, the past hidden)":
        "Query i may attend to keys 0..i: keep the lower triangle (torch.tril), hide the upper one.",
    "W^O was forgotten":
        "After concatenating the heads, apply the output projection: concat @ W_o.T + b_o.",
    "the output bias was left out":
        "mha.out_proj.bias is part of W^O: add it after the output projection.",
    "the input-projection biases were left out":
        "mha.in_proj_bias holds b_q, b_k, b_v (d_model entries each): add each after its projection.",
    "weights not transposed (torch.nn.Linear stores (d_out, d_in))":
        "torch keeps each projection as (d_out, d_in): project with x @ W.T + b.",
    "queries and keys projected with each other's weights":
        "mha.in_proj_weight stacks W_q, W_k, W_v in that order (rows 0:d, d:2d, 2d:3d).",
    "split into heads by a reshape without transpose":
        "Reshape (B, T, d_model) to (B, T, h, d_k), then swap axes 1 and 2: (B, h, T, d_k).",
    "heads merged in the wrong axis order":
        "Swap the h and T axes back ((B, T, h, d_k)) before reshaping to (B, T, d_model).",
    "heads averaged instead of concatenated":
        "Concat(head_1, ..., head_h) keeps every head: (B, T, h*d_k) = (B, T, d_model) before W^O.",
    "attention weights averaged over heads":
        "Return the weights of every head: (B, h, T_q, T_k).",
    "keys and values computed from the query (right for self-attention only)":
        "Project key with W_k and value with W_v: in cross-attention they differ from query, and T_k != T_q.",
    "causal mask built for T_q x T_q (wrong when T_q != T_k)":
        "The mask is (T_q, T_k): query i sees keys 0..i, torch.ones(T_q, T_k).tril().",
}


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------

def dims(names: str, shape) -> str:
    """'(B, T, d) = (2, 5, 12)': a shape next to the names of its axes."""
    shape = tuple(int(s) for s in shape)
    labels = [n.strip() for n in names.split(",")]
    if len(labels) != len(shape):
        return str(shape)
    return f"({', '.join(labels)}) = {shape}"


def _named_sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _sizes_note(sizes: dict) -> str:
    if not sizes:
        return ""
    if len(set(sizes.values())) == len(sizes):
        return (f" The sizes here are all different ({_named_sizes(sizes)}): code that only works "
                "when some of them are equal fails on them.")
    return f" The sizes here: {_named_sizes(sizes)}."


def _first_difference(got: np.ndarray, want: np.ndarray) -> str:
    bad = ~np.isclose(got, want, rtol=1e-5, atol=1e-6)
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"at index {idx} expected {want[idx]:.4g}, got {got[idx]:.4g}"


# --------------------------------------------------------------------------------------------
# Running the student's function: no ready-made answers
# --------------------------------------------------------------------------------------------

_LIB_DIR = os.path.dirname(os.path.abspath(__file__))
_THIS_FILE = os.path.abspath(__file__)
_NOT_READY_MADE: set[str] = set()  # files of mha_lib a student may call (none; the unit tests add this one)
_TORCH_C_FUNCTIONS = {
    "scaled_dot_product_attention": "torch's F.scaled_dot_product_attention",
    "_native_multi_head_attention": "torch's fused multi-head attention",
}


def _torch_ready_made() -> dict:
    import torch
    import torch.nn.functional as F
    return {torch.nn.MultiheadAttention.forward.__code__: "torch.nn.MultiheadAttention's forward (calling the module)",
            F.multi_head_attention_forward.__code__: "torch's F.multi_head_attention_forward"}


def _lib_name(code) -> str | None:
    """'mha_lib.reference.split_heads' when ``code`` belongs to mha_lib (this file included)."""
    path = os.path.abspath(code.co_filename)
    if os.path.dirname(path) != _LIB_DIR or path in _NOT_READY_MADE or code.co_name == "<module>":
        return None
    module = os.path.splitext(os.path.basename(path))[0]
    return f"mha_lib.{module}.{code.co_qualname}"


def run_student(fn: Callable, args: tuple, name: str, forbid_torch: bool = False, yourself: str = ""):
    """Call ``fn(*args)``; return its result, or the exception it raised.

    Raises :class:`Mistake` if the call reached a ready-made answer: any function of mha_lib,
    or (``forbid_torch``) torch's MultiheadAttention, F.multi_head_attention_forward or
    F.scaled_dot_product_attention.
    """
    __tracebackhide__ = True
    forbidden = _torch_ready_made() if forbid_torch else {}
    seen: dict = {}
    hits: list[str] = []

    def profile(frame, event, arg):
        if hits:
            return
        if event == "call":
            code = frame.f_code
            if code not in seen:
                seen[code] = forbidden.get(code) or _lib_name(code)
            if seen[code]:
                hits.append(seen[code])
        elif event == "c_call" and forbid_torch:
            hit = _TORCH_C_FUNCTIONS.get(getattr(arg, "__name__", ""))
            if hit:
                hits.append(hit)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn(*args)
    except Exception as err:  # the student's error is reported, not raised
        result = err
    finally:
        sys.setprofile(previous)
    if hits:
        raise Mistake(f"{name} calls {hits[0]}, a ready-made answer to this exercise: this part earns no "
                      f"credit while it does. {yourself}".rstrip())
    return result


# --------------------------------------------------------------------------------------------
# Comparing a result with the expected one, and naming the mistake
# --------------------------------------------------------------------------------------------

def _outcome(fn: Callable, args: tuple, pick: Callable):
    try:
        return np.asarray(pick(fn(*args)), dtype=float)
    except Exception as err:
        return err


def diagnose(got, args: tuple, pitfalls: list[Pitfall], pick: Callable = lambda r: r,
             rtol: float = 1e-6, atol: float = 1e-8) -> tuple[str, list[Pitfall]]:
    """Which known mistakes explain ``got`` (an array, or the exception the student's code raised)?

    Returns ``("exact", [p])`` when ``got`` equals what pitfall ``p`` computes on ``args``;
    ``("shape", [...])`` when only the shape agrees; ``("raises", [...])`` when ``got`` is an
    exception and these pitfalls raise the same error with the same message; ``("", [])`` when
    nothing fits.
    """
    outcomes = [(p, _outcome(p.fn, args, pick)) for p in pitfalls]
    if isinstance(got, BaseException):
        same = [p for p, o in outcomes if type(o) is type(got) and str(o) == str(got)]
        return ("raises", same) if same else ("", [])
    got = np.asarray(got, dtype=float)
    for p, o in outcomes:
        if isinstance(o, np.ndarray) and o.shape == got.shape and np.allclose(got, o, rtol, atol, equal_nan=True):
            return "exact", [p]
    same_shape = [p for p, o in outcomes if isinstance(o, np.ndarray) and o.shape == got.shape]
    return ("shape", same_shape) if same_shape else ("", [])


def _explain(kind: str, found: list[Pitfall]) -> str:
    if kind == "exact":
        return f" Known mistake: {found[0].name}. {found[0].hint}"
    if kind == "shape":
        return " This is the shape that these known mistakes give: " + "; ".join(
            f"{p.name} ({p.hint})" for p in found[:2])
    if kind == "raises":
        return " Known mistakes that fail exactly this way: " + "; ".join(f"{p.name} ({p.hint})" for p in found[:2])
    return ""


def _as_array(value, call: str, what: str = "the result") -> np.ndarray:
    if value is None:
        raise Mistake(f"{call} returned None: is a `return` missing?" if what == "the result"
                      else f"{call}: {what} is None; expected an array.")
    if isinstance(value, tuple | list | dict | str):
        raise Mistake(f"{call}: {what} is a {type(value).__name__}; expected one array.")
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise Mistake(f"{call}: {what} is a {type(value).__name__}; expected an array.") from None


def compare(call: str, got, want: np.ndarray, layout: str, args: tuple, pitfalls: list[Pitfall],
            sizes: dict, pick: Callable = lambda r: r, what: str = "the result",
            rtol: float = 1e-6, atol: float = 1e-8, shape_only: bool = False) -> None:
    """Raise :class:`Mistake` unless ``got`` (already picked) matches ``want``; name the mistake if known."""
    __tracebackhide__ = True
    if isinstance(got, NotImplementedError):
        raise Mistake(f"{call} raised NotImplementedError: it is not written yet (replace "
                      "`raise NotImplementedError()` with your code).")
    if isinstance(got, BaseException):
        raise Mistake(f"{call} raised {type(got).__name__}: {got}."
                      + _explain(*diagnose(got, args, pitfalls, pick)) + _sizes_note(sizes))
    got = _as_array(got, call, what)
    if got.shape != want.shape:
        order = " (the right sizes in the wrong order: check which axes you swap)" \
            if sorted(got.shape) == sorted(want.shape) else ""
        raise Mistake(f"{call}: wrong shape for {what}: {tuple(got.shape)}; expected {dims(layout, want.shape)}{order}."
                      + _explain(*diagnose(got, args, pitfalls, pick, rtol, atol)) + _sizes_note(sizes))
    if shape_only:
        return
    if np.isnan(got).any() and not np.isnan(want).any():
        kind, found = diagnose(got, args, pitfalls, pick, rtol, atol)
        raise Mistake(f"{call}: {what} contains NaN. A softmax over a row where every score is -inf gives "
                      "NaN: does your mask hide every key from some query?"
                      + (_explain(kind, found) if kind == "exact" else ""))
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        kind, found = diagnose(got, args, pitfalls, pick, rtol, atol)
        detail = _explain("exact", found) if kind == "exact" else (
            " It matches none of the known mistakes: check each step against the worked example.")
        raise Mistake(f"{call}: wrong values in {what} ({_first_difference(got, want)})." + detail
                      + _sizes_note(sizes))


def _copy(args: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else
                 [x.copy() for x in a] if isinstance(a, list) else a for a in args)


def _want(expected, computed):
    return np.asarray(computed if expected is None else expected, dtype=float)


# --------------------------------------------------------------------------------------------
# One check per exercise part
# --------------------------------------------------------------------------------------------

def check_project(project: Callable, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                  expected: np.ndarray | None = None) -> None:
    """project(x, w, b) == x @ w + b, for x (..., d_in), w (d_in, d_out), b (d_out,) or None."""
    __tracebackhide__ = True
    x_names = "B, T, d_in" if x.ndim == 3 else "T, d_in"
    call = (f"project(x, w{', b' if b is not None else ''}) with x {dims(x_names, x.shape)}, "
            f"w {dims('d_in, d_out', w.shape)}")
    want = _want(expected, reference.project(x, w, b))
    args = (x, w, b)
    got = run_student(project, _copy(args), "project", yourself="Write it with @ and +.")
    sizes = dict(zip(x_names.split(", ")[:-1], x.shape[:-1])) | {"d_in": w.shape[0], "d_out": w.shape[1]}
    compare(call, got, want, x_names.replace("d_in", "d_out"), args, PROJECT_PITFALLS, sizes)


def check_fuse_heads(fuse_heads: Callable, w_heads: list, b_heads: list | None = None,
                     expected: tuple | None = None) -> None:
    """fuse_heads(w_heads, b_heads) == (the h (d, d_k) blocks side by side, the biases concatenated)."""
    __tracebackhide__ = True
    h, (d, d_k) = len(w_heads), w_heads[0].shape
    call = (f"fuse_heads(w_heads{', b_heads' if b_heads is not None else ''}) with h={h} heads of "
            f"{dims('d, d_k', (d, d_k))}")
    want_w, want_b = expected if expected is not None else _fuse_columns(w_heads, b_heads)
    args = (w_heads, b_heads)
    got = run_student(fuse_heads, _copy(args), "fuse_heads", yourself="Write it with np.concatenate.")
    sizes = {"h": h, "d": d, "d_k": d_k}
    if not isinstance(got, BaseException) and not (isinstance(got, tuple) and len(got) == 2):
        raise Mistake(f"{call} returned {type(got).__name__}; expected a pair (w, b).")
    got_w = got if isinstance(got, BaseException) else got[0]
    compare(call, got_w, np.asarray(want_w), "d, h*d_k", args, FUSE_HEADS_PITFALLS, sizes,
            pick=lambda r: r[0], what="the fused weight w")
    if b_heads is None:
        if got[1] is not None:
            raise Mistake(f"{call}: with b_heads=None the fused bias should be None too.")
        return
    if got[1] is None:
        p = FUSE_HEADS_PITFALLS[-1]
        raise Mistake(f"{call}: the fused bias b is None; expected {dims('h*d_k', want_b.shape)}. "
                      f"Known mistake: {p.name}. {p.hint}")
    compare(call, got[1], np.asarray(want_b), "h*d_k", args, FUSE_HEADS_PITFALLS, sizes,
            pick=lambda r: r[1], what="the fused bias b")


def check_split_heads(split_heads: Callable, x: np.ndarray, num_heads: int, expected: np.ndarray | None = None,
                      shape_only: bool = False) -> None:
    """split_heads(x, h): (B, T, d) -> (B, h, T, d_k), head i holding features i*d_k:(i+1)*d_k."""
    __tracebackhide__ = True
    b, t, d = x.shape
    call = f"split_heads(x, num_heads={num_heads}) with x {dims('B, T, d', x.shape)}"
    want = _want(expected, reference.split_heads(x, num_heads))
    args = (x, num_heads)
    got = run_student(split_heads, _copy(args), "split_heads", yourself="Write it with reshape and transpose.")
    sizes = {"B": b, "h": num_heads, "T": t, "d_k": d // num_heads}
    compare(call, got, want, "B, h, T, d_k", args, SPLIT_HEADS_PITFALLS, sizes, shape_only=shape_only)


def check_merge_heads(merge_heads: Callable, x: np.ndarray, expected: np.ndarray | None = None,
                      shape_only: bool = False) -> None:
    """merge_heads(x): (B, h, T, d_v) -> (B, T, h*d_v) = Concat(head_1, ..., head_h)."""
    __tracebackhide__ = True
    b, h, t, d_v = x.shape
    call = f"merge_heads(x) with x {dims('B, h, T, d_v', x.shape)}"
    want = _want(expected, reference.merge_heads(x))
    args = (x,)
    got = run_student(merge_heads, _copy(args), "merge_heads", yourself="Write it with transpose and reshape.")
    sizes = {"B": b, "h": h, "T": t, "d_v": d_v}
    compare(call, got, want, "B, T, h*d_v", args, MERGE_HEADS_PITFALLS, sizes, shape_only=shape_only)


def check_output_projection(output_projection: Callable, x: np.ndarray, w_o: np.ndarray,
                            b_o: np.ndarray | None = None, expected: np.ndarray | None = None) -> None:
    """output_projection(x, w_o, b_o) == x @ w_o + b_o, x (B, T, h*d_v), w_o (h*d_v, d_model)."""
    __tracebackhide__ = True
    call = (f"output_projection(x, w_o{', b_o' if b_o is not None else ''}) with x "
            f"{dims('B, T, h*d_v', x.shape)}, w_o {dims('h*d_v, d_model', w_o.shape)}")
    want = _want(expected, reference.output_projection(x, w_o, b_o))
    args = (x, w_o, b_o)
    got = run_student(output_projection, _copy(args), "output_projection", yourself="Write it with @ and +.")
    sizes = {"B": x.shape[0], "T": x.shape[1], "h*d_v": w_o.shape[0], "d_model": w_o.shape[1]}
    compare(call, got, want, "B, T, d_model", args, OUTPUT_PROJECTION_PITFALLS, sizes)


def check_output_projection_per_head(fn: Callable, heads: np.ndarray, w_o: np.ndarray,
                                     b_o: np.ndarray | None = None, expected: np.ndarray | None = None) -> None:
    """sum_i heads[:, i] @ W^O_i + b_o == Concat(heads) @ W^O + b_o, W^O_i the rows i*d_v:(i+1)*d_v."""
    __tracebackhide__ = True
    b, h, t, d_v = heads.shape
    call = (f"output_projection_per_head(heads, w_o{', b_o' if b_o is not None else ''}) with heads "
            f"{dims('B, h, T, d_v', heads.shape)}, w_o {dims('h*d_v, d_model', w_o.shape)}")
    want = _want(expected, reference.output_projection(reference.merge_heads(heads), w_o, b_o))
    args = (heads, w_o, b_o)
    got = run_student(fn, _copy(args), "output_projection_per_head",
                      yourself="Write the sum over heads yourself.")
    sizes = {"B": b, "h": h, "T": t, "d_v": d_v, "d_model": w_o.shape[1]}
    compare(call, got, want, "B, T, d_model", args, OUTPUT_PER_HEAD_PITFALLS, sizes)


# --------------------------------------------------------------------------------------------
# The assembly, in PyTorch
# --------------------------------------------------------------------------------------------

def random_mha(embed_dim: int, num_heads: int, seed: int, dtype=None):
    """A ``torch.nn.MultiheadAttention`` (batch_first) whose weights AND biases are all random.

    torch initialises the biases to zero, which would hide a forgotten bias.
    """
    import torch
    dtype = dtype or torch.float64
    gen = torch.Generator().manual_seed(seed)
    mha = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, dtype=dtype)
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=dtype) / math.sqrt(embed_dim))
    return mha.eval()


def random_inputs(batch: int, q_len: int, k_len: int, embed_dim: int, seed: int, dtype=None):
    """query (B, T_q, d), key and value (B, T_k, d): three different random tensors."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    shape_q, shape_k = (batch, q_len, embed_dim), (batch, k_len, embed_dim)
    return tuple(torch.randn(s, generator=gen, dtype=dtype or torch.float64) for s in (shape_q, shape_k, shape_k))


def torch_attention(query, key, value, mha, causal: bool = False):
    """torch's own answer: (out (B, T_q, d), per-head weights (B, h, T_q, T_k))."""
    import torch
    mask = None
    if causal:  # torch's boolean mask: True = may NOT attend
        mask = ~torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).tril()
    with torch.no_grad():
        return mha(query, key, value, attn_mask=mask, need_weights=True, average_attn_weights=False)


def _attention(query, key, value, mha, causal: bool = False, mistake: str = ""):
    """Multi-head attention from mha's weights, with one of ATTENTION_MISTAKES switched on."""
    import torch
    d, h = mha.embed_dim, mha.num_heads
    d_k = d // h
    with torch.no_grad():
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
        b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
        if mistake == "queries and keys projected with each other's weights":
            w_q, w_k, b_q, b_k = w_k, w_q, b_k, b_q
        if mistake == "the input-projection biases were left out":
            b_q = b_k = b_v = None
        transpose = mistake != "weights not transposed (torch.nn.Linear stores (d_out, d_in))"

        def linear(x, w, b):
            return _plus(x @ (w.T if transpose else w), b)

        def split(x):
            n, t, _ = x.shape
            if mistake == "split into heads by a reshape without transpose":
                return x.reshape(n, h, t, d_k)
            return x.reshape(n, t, h, d_k).transpose(1, 2)

        if mistake == "keys and values computed from the query (right for self-attention only)":
            key = value = query
        q, k, v = split(linear(query, w_q, b_q)), split(linear(key, w_k, b_k)), split(linear(value, w_v, b_v))
        scale = {"scaled by sqrt(d_model) instead of sqrt(d_k)": math.sqrt(d),
                 "scores not scaled": 1.0}.get(mistake, math.sqrt(d_k))
        scores = q @ k.transpose(-2, -1) / scale  # (B, h, T_q, T_k)
        t_q, t_k = scores.shape[-2:]
        allowed = None
        if causal:
            allowed = torch.ones(t_q, t_k, dtype=torch.bool).tril()
            if mistake == "mask the wrong way round (the future kept, the past hidden)":
                allowed = torch.ones(t_q, t_k, dtype=torch.bool).triu()
            if mistake == "causal mask built for T_q x T_q (wrong when T_q != T_k)":
                allowed = torch.ones(t_q, t_q, dtype=torch.bool).tril()
        if allowed is not None and mistake != "mask applied after the softmax":
            scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-2 if mistake == "softmax over the wrong axis" else -1)
        if allowed is not None and mistake == "mask applied after the softmax":
            weights = weights.masked_fill(~allowed, 0.0)
        heads = weights @ v  # (B, h, T_q, d_k)
        n = heads.shape[0]
        if mistake == "heads averaged instead of concatenated":
            concat = heads.mean(1)
        elif mistake == "heads merged in the wrong axis order":
            concat = heads.permute(0, 2, 3, 1).reshape(n, t_q, d)
        else:
            concat = heads.transpose(1, 2).reshape(n, t_q, d)
        if mistake == "W^O was forgotten":
            out = concat
        else:
            out_bias = None if mistake == "the output bias was left out" else mha.out_proj.bias
            out = linear(concat, mha.out_proj.weight, out_bias)
        if mistake == "attention weights averaged over heads":
            weights = weights.mean(1)
        return out, weights


ATTENTION_PITFALLS = [Pitfall(name, hint, lambda q, k, v, m, c, _name=name: _attention(q, k, v, m, c, _name))
                      for name, hint in ATTENTION_MISTAKES.items()]


def check_attention(multi_head_attention: Callable, query, key, value, mha, causal: bool = False,
                    shape_only: bool = False) -> None:
    """The student's multi_head_attention(query, key, value, mha, causal) against torch's forward."""
    __tracebackhide__ = True
    import torch
    n, t_q, d = query.shape
    t_k, h = key.shape[1], mha.num_heads
    call = (f"multi_head_attention(query, key, value, mha, causal={causal}) with query "
            f"{dims('B, T_q, d_model', query.shape)}, key and value {dims('B, T_k, d_model', key.shape)}, "
            f"num_heads={h}")
    want_out, want_weights = (t.numpy() for t in torch_attention(query, key, value, mha, causal))
    args = (query, key, value, mha, causal)
    student_args = (query.clone(), key.clone(), value.clone(), mha, causal)
    got = run_student(multi_head_attention, student_args, "multi_head_attention", forbid_torch=True,
                      yourself="Write softmax(Q K^T / sqrt(d_k)) V yourself, from mha's weights.")
    sizes = {"B": n, "T_q": t_q, "T_k": t_k, "d_model": d, "h": h, "d_k": d // h}
    if not isinstance(got, BaseException) and not (isinstance(got, tuple) and len(got) == 2):
        raise Mistake(f"{call} returned {type(got).__name__}; expected a pair (out, weights).")
    tol = {"rtol": 1e-5, "atol": 1e-7} if query.dtype == torch.float64 else {"rtol": 1e-3, "atol": 1e-5}
    compare(call, got if isinstance(got, BaseException) else got[0], want_out, "B, T_q, d_model", args,
            ATTENTION_PITFALLS, sizes, pick=lambda r: r[0], what="the output", shape_only=shape_only, **tol)
    compare(call, got[1], want_weights, "B, h, T_q, T_k", args, ATTENTION_PITFALLS, sizes,
            pick=lambda r: r[1], what="the attention weights", shape_only=shape_only, **tol)


def check_attention_weights(multi_head_attention: Callable, query, key, value, mha, causal: bool) -> None:
    """Weights that are a distribution over the keys (each row sums to 1) and, if causal, hide the future."""
    __tracebackhide__ = True
    call = f"multi_head_attention(query, key, value, mha, causal={causal})"
    got = run_student(multi_head_attention, (query.clone(), key.clone(), value.clone(), mha, causal),
                      "multi_head_attention", forbid_torch=True,
                      yourself="Write softmax(Q K^T / sqrt(d_k)) V yourself, from mha's weights.")
    if isinstance(got, BaseException):
        compare(call, got, np.zeros(0), "", (), [], {})  # the same sentence as every other check
    if not (isinstance(got, tuple) and len(got) == 2):
        raise Mistake(f"{call} returned {type(got).__name__}; expected a pair (out, weights).")
    weights = _as_array(got[1], call, "the attention weights")
    want = (query.shape[0], mha.num_heads, query.shape[1], key.shape[1])
    if weights.shape != want:
        raise Mistake(f"{call}: the attention weights have shape {weights.shape}; expected "
                      f"{dims('B, h, T_q, T_k', want)}.")
    if np.isnan(weights).any():
        raise Mistake(f"{call}: the attention weights contain NaN: does your mask hide every key from some query?")
    if (weights < 0).any():
        raise Mistake(f"{call}: some attention weights are negative; a softmax gives weights in [0, 1].")
    rows = weights.sum(axis=-1)
    if not np.allclose(rows, 1.0, atol=1e-5):
        cols = np.allclose(weights.sum(axis=-2), 1.0, atol=1e-5)
        why = (" The columns sum to 1 instead: the softmax ran over the queries (dim=-2), not over the keys."
               if cols else " Mask the scores before the softmax (with -inf), not the weights after it.")
        raise Mistake(f"{call}: each query's weights over the keys should sum to 1; one row sums to "
                      f"{rows.flat[np.argmax(np.abs(rows - 1.0))]:.4g}.{why}")
    if causal:
        future = ~np.tril(np.ones(want[-2:], dtype=bool))
        if np.abs(weights[..., future]).max(initial=0.0) > 1e-7:
            raise Mistake(f"{call}: with causal=True, query i must give weight 0 to keys after i (the upper "
                          "triangle), but some of those weights are not 0.")
