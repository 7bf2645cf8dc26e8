"""One check per graded function: the reference, the shapes with axis names, and the diagnosis.

Each ``check`` raises :class:`mha_checks.judge.Fail` with one plain message, or returns when the
answer is right. Diagnosis, in order: the mistakes of :mod:`mha_checks.variants` (and
:mod:`mha_checks.attention`) alone and two at a time; for rearrangements, which
reshape/transpose produced the result (:mod:`mha_checks.arrange`); for linear maps, a fit of
the result as ``x @ M + c`` compared with ``w`` and ``b``; for exercise 5, the stage where the
answer departs (the weights show everything up to the softmax), a fitted scale factor, the
mask's zeros and the merge seen through W^O.
"""
import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import arrange, arrays, attention, calling, variants
from .arrays import NotAnArray, dims
from .cases import MhaWeights
from .verdicts import Fail, sizes_note


@dataclass(frozen=True)
class Spec:
    describe: Callable   # case -> "split_heads(x, num_heads=3) with x (B, T, d) = (2, 5, 12)"
    check: Callable      # (case, decoded result, call) -> None, or raises Fail
    sizes: Callable      # case -> {"B": 2, ...}: the named sizes of the case


def _np(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


# --- shared: reading an answer, explaining it -----------------------------------------------------

def read_array(value, call: str, what: str = "the result") -> np.ndarray:
    try:
        return arrays.as_array(value)
    except NotAnArray as err:
        if value is None:
            text = (f"{call} returned None: is a `return` missing?" if what == "the result"
                    else f"{call}: {what} is None; expected an array.")
            raise Fail(text, "returns None") from None
        if "dtype" in str(err):
            raise Fail(f"{call}: {what} is {err}, which cannot be checked: return float16, float32 or float64 "
                       "values.", "unreadable dtype") from None
        raise Fail(f"{call}: {what} is {err}; expected one array (NumPy or torch).", "not an array") from None


def read_pair(value, call: str, names: str) -> tuple:
    if isinstance(value, tuple | list) and len(value) == 2:
        return tuple(value)
    if value is None:
        raise Fail(f"{call} returned None: is a `return` missing? It should return a pair ({names}).",
                   "returns None")
    what = f"a {type(value).__name__} of {len(value)}" if isinstance(value, tuple | list) else \
        "one array" if isinstance(value, np.ndarray) else arrays.with_article(str(value)) \
        if isinstance(value, calling.Other) else f"a {type(value).__name__}"
    raise Fail(f"{call} returned {what}; expected a pair ({names}): return {names.replace(', ', ', ')}.",
               "not a pair")


def named(switches: tuple, prefix: str = "") -> tuple[str, str]:
    """(label, sentence) for one or two mistakes."""
    label = " + ".join(s.label for s in switches)
    if len(switches) == 1:
        s = switches[0]
        return label, f"{prefix}This is a known mistake, {s.label}: {s.fix}."
    a, b = switches
    return label, f"{prefix}Two mistakes at once: {a.label} ({a.fix}), and {b.label} ({b.fix})."


def find_variant(got, tol: float, switches: list, compute: Callable, pick: Callable = lambda r: r,
                 ok: Callable = lambda keys: True):
    """The first mistake (or pair) whose result equals ``got``."""
    for combo in variants.combos(switches):
        keys = frozenset(s.key for s in combo)
        if not ok(keys):
            continue
        try:
            value = pick(compute(keys))
        except Exception:  # noqa: BLE001 - a mistake that cannot run here explains nothing
            continue
        if value is not None and arrays.all_close(got, value, tol):
            return combo
    return None


def compare(call: str, got: np.ndarray, want: np.ndarray, axes: str, what: str, tol: float,
            explain: Callable, sizes: dict, shape_only: bool = False) -> None:
    """Fail unless ``got`` matches ``want`` (shape, then values); ``explain(got)`` names the mistake."""
    if got.shape != want.shape:
        order = " (the right sizes in the wrong order: check which axes you swap)" \
            if sorted(got.shape) == sorted(want.shape) else ""
        label, text = explain(got) or ("wrong shape", "")
        raise Fail(f"{call}: wrong shape for {what}: {tuple(got.shape)}; expected {dims(axes, want.shape)}{order}."
                   + (" " + text if text else sizes_note(sizes)), label)
    if shape_only:
        return
    if arrays.all_close(got, want, tol):
        return
    if np.isnan(got).any() and not np.isnan(want).any():
        found = explain(got)
        raise Fail(f"{call}: NaN in {what}. A softmax over a row whose scores are all -inf gives NaN: "
                   "does a mask hide every key from some query?" + (" " + found[1] if found else ""),
                   found[0] if found else "NaN in the result")
    found = explain(got)
    if (found is None or found[0] in VAGUE) and arrays.half_precision_only(got, want):
        found = ("precision lost (16-bit arithmetic inside)", f"Your values are right to about 3 digits only, as if "
                 f"computed in float16 (or bfloat16) and converted back to {got.dtype}, which is held to 1e-5: "
                 "compute in float32 or float64, or return the 16-bit result as it is.")
    where = arrays.first_difference(got, want, tol)
    label, text = found or ("wrong values", "Check each step against the worked example." + sizes_note(sizes))
    raise Fail(f"{call}: wrong values in {what} ({where}). {text}", label)


VAGUE = {"not a linear map of x", "departs before the softmax", "departs at the softmax", "departs after the softmax"}


def error_fail(call: str, case, error: dict) -> None:
    kind, message = str(error.get("type", "Exception")), str(error.get("message", ""))[:300]
    line = error.get("line")
    at = f" (line {line} of your cell)" if isinstance(line, int) else ""
    if kind == "NotImplementedError":
        raise Fail(f"{call} raised NotImplementedError: it is not written yet (replace "
                   "`raise NotImplementedError()` with your code).", "not written yet")
    try:
        sizes = SPECS[case.function].sizes(case)
    except Exception:  # noqa: BLE001
        sizes = {}
    hint = error_hint(case, message, sizes) or same_error(case, kind, message)
    label = hint[0] if hint else f"raises {kind}"
    text = f" {hint[1]}" if hint else _numbers_note(message, sizes)
    raise Fail(f"{call} raised {kind}{at}: {message.rstrip('.')}.{text}", label)


def same_error(case, kind: str, message: str):
    """A mistake (or pair) of exercises 1-4 that raises exactly this error on this case."""
    runner = ERROR_VARIANTS.get(case.function)
    if runner is None:
        return None
    switches, compute = runner(case)
    for combo in variants.combos(switches):
        try:
            compute(frozenset(s.key for s in combo))
        except Exception as err:  # noqa: BLE001 - the error is what we compare
            if type(err).__name__ == kind and str(err)[:300] == message[:300]:
                return named(combo)
    return None


def _linear_runner(wname, bname):
    def runner(case):
        x, w, b = (_np(a) for a in (list(case.args) + [None])[:3])
        layout = "(d_in, d_out)" if wname == "w" else "(h*d_v, d_model)"
        return variants.linear_switches(wname, bname, "the product" if wname == "w" else "W^O", layout), \
            lambda m: variants.linear(x, w, b, m)
    return runner


def _per_head_runner(case):
    heads, w_o, b_o = (_np(a) for a in (list(case.args) + [None])[:3])
    return variants.PER_HEAD_SWITCHES, lambda m: variants.per_head(heads, w_o, b_o, m)


def _numbers_note(message: str, sizes: dict) -> str:
    """'Here 4 = d_k, 6 = T_q.' for the sizes an error message mentions."""
    names = {}
    for n, v in sizes.items():
        names.setdefault(int(v), []).append(n)
    said = []
    for token in dict.fromkeys(re.findall(r"(?<![\w.])(\d+)(?![\w.])", message)):
        v = int(token)
        if v > 1 and v in names and len(names[v]) == 1:
            said.append(f"{v} = {names[v][0]}")
    return f" Here {', '.join(said)}." if said else ""


def error_hint(case, message: str, sizes: dict):
    """A named mistake for errors that tell it: None added, an unbatched input, sizes of exercise 5."""
    bias = {"project": "b", "output_projection": "b_o", "output_projection_per_head": "b_o"}.get(case.function)
    if bias and "NoneType" in message and (list(case.args) + [None] * 3)[2] is None:
        return (f"{bias}=None not handled", f"Here {bias} is None (no bias) and adding None fails: add the bias "
                f"only when it is given, so when the bias is None return the product alone "
                f"(if {bias} is not None: out = out + {bias}).")
    keyword = re.search(r"unexpected keyword argument '(\w+)'", message)
    if keyword:
        return (f"wrong keyword argument {keyword.group(1)}=", f"The function you call has no argument named "
                f"{keyword.group(1)}= (NumPy's transpose takes axes=, torch's transpose two dims, TensorFlow's "
                "takes perm=): check its signature.")
    if case.function == "split_heads" and "equal division" in message:
        return named((variants.Switch("", *variants.SPLIT_ALONG_TIME),), f"Here T = {sizes['T']} cannot be cut into "
                     f"h = {sizes['h']} equal parts. ")
    if case.function in ("project", "output_projection") and np.ndim(case.args[0]) == 2:
        return ("fails on unbatched input", "This x is unbatched, (T, d_in): write the projection for any "
                "leading axes (x @ w works for (T, d_in) and (B, T, d_in) alike).")
    if case.function != "multi_head_attention" or not sizes:
        return None
    numbers = {int(t) for t in re.findall(r"\d+", message)}
    d_k, d, t_q, t_k = sizes["d_k"], sizes["d_model"], sizes["T_q"], sizes["T_k"]
    if d_k != d and d_k in numbers and d in numbers and ("mat" in message or "shape" in message):
        return named((attention.BY_KEY["heads_averaged"],), "A tensor with d_k = "
                     f"{d_k} features met W^O, which needs d_model = {d}. ")
    size = re.search(r"invalid for input of size (\d+)", message)
    if size and t_q != t_k and t_q in numbers and int(size.group(1)) == sizes["B"] * t_k * d:
        return ("keys reshaped with the query's length", f"The key (or value) holds T_k = {t_k} positions but was "
                f"reshaped with the query's T_q = {t_q}: reshape each with its own length (key.shape[1], or -1).")
    if t_q != t_k and {t_q, t_k} <= numbers and case.args[4]:
        return named((attention.BY_KEY["mask_square"],), f"A ({t_q}, {t_q}) mask met scores with T_k = {t_k} "
                     "keys. ")
    return None


# --- exercise 1: project and fuse_heads; exercise 4: output_projection ---------------------------

def _linear_sizes(case):
    x, w = case.args[0], case.args[1]
    lead = ["B", "T"] if np.ndim(x) == 3 else ["T"]
    return dict(zip(lead, np.shape(x)[:-1])) | {"d_in": w.shape[0], "d_out": w.shape[1]}


def _describe_linear(name: str, wname: str, bname: str, wlayout: str, xlayout: str):
    def describe(case):
        x, w, b = (list(case.args) + [None])[:3]
        xl = xlayout if np.ndim(x) == 3 else xlayout.split(", ", 1)[1]
        return (f"{name}(x, {wname}{', ' + bname if b is not None else ''}) with x {dims(xl, np.shape(x))}, "
                f"{wname} {dims(wlayout, np.shape(w))}")
    return describe


def linear_fit(got, x, w, b, tol, wname: str, bname: str):
    """Explain ``got`` as x @ M + c, compared with w and b (when enough rows make M unique)."""
    d_in, d_out = w.shape
    X, Y = x.reshape(-1, d_in), got.reshape(-1, d_out)
    if X.shape[0] < d_in + 2 or arrays.half_precision_only(got, variants.linear(x, w, b)):  # rounding, not a map
        return None
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    if np.linalg.matrix_rank(A) < d_in + 1:  # M and c are not determined by these inputs
        return None
    coef, *_ = np.linalg.lstsq(A, Y, rcond=None)
    if not arrays.all_close(A @ coef, Y, 10 * tol):
        return ("not a linear map of x", f"Your result is not x @ M + c for any M and c: use the matrix "
                f"product x @ {wname}, then add {bname}.")
    M, c = coef[:-1], coef[-1]
    parts, labels = [], []
    close = lambda a, b_: arrays.all_close(a, b_, 10 * tol)  # noqa: E731
    s = float((M * w).sum() / max((w * w).sum(), 1e-300))
    if not close(M, w):
        if close(M, s * w):
            parts.append(f"the product is {s:.4g} * x @ {wname}")
            labels.append("product scaled by a constant")
        elif w.shape[0] == w.shape[1] and close(M, w.T):
            parts.append(f"the product uses {wname}.T")
            labels.append(f"{wname} used transposed")
        else:
            parts.append(f"the product is not x @ {wname}")
            labels.append("wrong product")
    want_c = np.zeros(d_out) if b is None else b
    if not close(c, want_c):
        if b is None:
            parts.append(f"a constant is added although {bname} is None")
            labels.append("adds a bias that is None")
        elif close(c, 0 * b):
            parts.append(f"{bname} is not added")
            labels.append("the bias was left out")
        elif w.shape[0] == w.shape[1] and close(c, b @ w):
            parts.append(f"{bname} is added before the product")
            labels.append("the bias added before the product")
        else:
            k = float((c * b).sum() / max((b * b).sum(), 1e-300))
            parts.append(f"the constant added is {k:.4g} * {bname}" if close(c, k * b) else
                         f"the constant added is not {bname}")
            labels.append("wrong bias")
    if not parts:
        return None
    want = f"x @ {wname}" + ("" if b is None else f" + {bname}")
    return " + ".join(labels), f"Your result is a linear map of x, but {' and '.join(parts)}: compute {want}."


def _check_linear(wname, bname, out_axes, switches):
    def check(case, result, call):
        x, w, b = (_np(a) for a in (list(case.args) + [None])[:3])
        got = read_array(result, call)
        tol = arrays.tolerance(arrays.result_dtype(got))
        want = _np(case.expected) if case.expected is not None else variants.linear(x, w, b)
        axes = out_axes if x.ndim == 3 else out_axes.split(", ", 1)[1]

        def explain(g):
            combo = find_variant(g, tol, switches, lambda m: variants.linear(x, w, b, m))
            if combo:
                return named(combo)
            if g.shape == want.shape and case.expected is None:
                return linear_fit(g, x, w, b, tol, wname, bname)
            return None
        compare(call, got, want, axes, "the result", tol, explain, _linear_sizes(case), case.check == "shape")
    return check


def _describe_fuse(case):
    w_heads, b_heads = (list(case.args) + [None])[:2]
    d, d_k = np.shape(w_heads[0])
    return (f"fuse_heads(w_heads{', b_heads' if b_heads is not None else ''}) with h={len(w_heads)} heads "
            f"of {dims('d, d_k', (d, d_k))}")


def _check_fuse(case, result, call):
    w_heads = [_np(a) for a in case.args[0]]
    b_heads = None if len(case.args) < 2 or case.args[1] is None else [_np(a) for a in case.args[1]]
    got_w, got_b = read_pair(result, call, "w, b")
    got_w = read_array(got_w, call, "the fused weight w")
    tol = arrays.tolerance(arrays.result_dtype(got_w))
    want_w, want_b = (tuple(_np(e) if e is not None else None for e in case.expected) if case.expected is not None
                      else variants.fuse(w_heads, b_heads))
    h, (d, d_k) = len(w_heads), w_heads[0].shape
    sizes = {"h": h, "d": d, "d_k": d_k}

    def explain_w(g):
        combo = find_variant(g, tol, variants.FUSE_SWITCHES, lambda m: variants.fuse(w_heads, b_heads, m),
                             pick=lambda r: r[0])
        if combo:
            return named(combo)
        found = arrange.analyse(g, np.stack(w_heads), {"h": h, "d": d, "d_k": d_k}, tol)
        if found and not found.plain:
            return (f"heads arranged as {found.code('W')}", f"Your w holds the heads' elements as "
                    f"{found.code('W')} (W = np.stack(w_heads), (h, d, d_k)): put the blocks side by side "
                    "with np.concatenate(w_heads, axis=1).")
        return None
    compare(call, got_w, want_w, "d, h*d_k", "the fused weight w", tol, explain_w, sizes)
    if want_b is None:
        if got_b is not None:
            raise Fail(f"{call}: with b_heads=None the fused bias should be None too.", "bias not None")
        return
    if got_b is None:
        raise Fail(f"{call}: the fused bias b is None; expected {dims('h*d_k', want_b.shape)}. "
                   + named((variants.FUSE_SWITCHES[3],))[1], variants.FUSE_SWITCHES[3].label)
    got_b = read_array(got_b, call, "the fused bias b")

    def explain_b(g):
        combo = find_variant(g, tol, variants.FUSE_SWITCHES, lambda m: variants.fuse(w_heads, b_heads, m),
                             pick=lambda r: r[1])
        return named(combo) if combo else None
    compare(call, got_b, want_b, "h*d_k", "the fused bias b", tol, explain_b, sizes)


# --- exercise 2 and 3: split and merge -------------------------------------------------------------

def _split_sizes(case):
    (b, t, d), h = np.shape(case.args[0]), int(case.args[1])
    return {"B": b, "T": t, "h": h, "d_k": d // max(h, 1)}


def _check_split(case, result, call):
    x, h = _np(case.args[0]), int(case.args[1])
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    want = _np(case.expected) if case.expected is not None else variants.split(x, h)
    sizes = _split_sizes(case)

    def explain(g):
        found = arrange.analyse(g, x, sizes, tol)
        if found is None:
            return None
        if found.plain:
            if g.shape == (sizes["B"], sizes["h"], sizes["T"] // sizes["h"], x.shape[-1]):
                return named((variants.Switch("", *variants.SPLIT_ALONG_TIME),))
            if g.shape == want.shape:
                label, fix = variants.SPLIT_NAMES["plain"]
                return named((variants.Switch("", label, fix),), "Your result keeps x's elements in their "
                             "original order (a reshape alone). ")
            return None
        label, fix = variants.SPLIT_NAMES.get((found.order, found.perm), (None, None))
        if label is None and found.order.index("T") < found.order.index("B"):
            label, fix = variants.B_T_MIXED
        if label is None:
            return (f"elements arranged as {found.code()}", f"Your result is {found.code()}: "
                    f"{variants.SPLIT_FIX}.")
        return named((variants.Switch("", label, fix),), f"Your result is {found.code()}. ")
    compare(call, got, want, "B, h, T, d_k", "the result", tol, explain, sizes, case.check == "shape")


def _merge_sizes(case):
    b, h, t, d_v = np.shape(case.args[0])
    return {"B": b, "h": h, "T": t, "d_v": d_v}


def _check_merge(case, result, call):
    x = _np(case.args[0])
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    want = _np(case.expected) if case.expected is not None else variants.merge(x)
    sizes = _merge_sizes(case)
    b, h, t, d_v = x.shape

    def explain(g):
        combo = find_variant(g, tol, variants.MERGE_SWITCHES, lambda m: variants.merge(x, m))
        if combo:
            return named(combo)
        found = arrange.analyse(g, x, sizes, tol)
        if found is None:
            return None
        if found.plain:
            story = (variants.MERGE_PLAIN if g.shape == want.shape else
                     variants.MERGE_ALONG_TIME if g.shape == (b, h * t, d_v) else None)
            return named((variants.Switch("", *story),), "Your result keeps x's elements in their original "
                         "order (a reshape alone). ") if story else None
        known = variants.MERGE_NAMES.get((found.order, found.perm))
        if known is None and found.order == tuple(sizes) and found.perm.index(2) < found.perm.index(0):
            known = variants.MERGE_B_T
        if known:
            return named((variants.Switch("", *known),), f"Your result is {found.code()}. ")
        return (f"elements arranged as {found.code()}", f"Your result is {found.code()}: {variants.MERGE_FIX}.")
    compare(call, got, want, "B, T, h*d_v", "the result", tol, explain, sizes, case.check == "shape")


# --- exercise 4 part B ---------------------------------------------------------------------------

def _describe_per_head(case):
    heads, w_o, b_o = (list(case.args) + [None])[:3]
    return (f"output_projection_per_head(heads, w_o{', b_o' if b_o is not None else ''}) with heads "
            f"{dims('B, h, T, d_v', np.shape(heads))}, w_o {dims('h*d_v, d_model', np.shape(w_o))}")


def _check_per_head(case, result, call):
    heads, w_o, b_o = (_np(a) for a in (list(case.args) + [None])[:3])
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    want = _np(case.expected) if case.expected is not None else variants.per_head(heads, w_o, b_o)
    b, h, t, d_v = heads.shape
    sizes = {"B": b, "h": h, "T": t, "d_v": d_v, "d_model": w_o.shape[1]}

    def explain(g):
        combo = find_variant(g, tol, variants.PER_HEAD_SWITCHES, lambda m: variants.per_head(heads, w_o, b_o, m))
        if combo:
            return named(combo)
        if g.shape == want.shape and case.expected is None:
            fit = linear_fit(g, variants.merge(heads), w_o, b_o, tol, "w_o", "b_o")
            if fit:
                label, text = fit
                head, _, _ = text.rpartition(": compute ")
                return label, (head.replace("a linear map of x", "a linear map of the heads") + ": compute the sum "
                               "over heads of heads[:, i] @ w_o[i*d_v:(i+1)*d_v]"
                               + ("." if b_o is None else ", plus b_o once."))
        return None
    compare(call, got, want, "B, T, d_model", "the result", tol, explain, sizes)


# --- exercise 5 ----------------------------------------------------------------------------------

def attention_inputs(case) -> attention.Inputs:
    query, key, value, mha, causal = case.args
    weights = mha.weights if isinstance(mha, MhaWeights) else mha
    return attention.Inputs(_np(query), _np(key), _np(value), {k: _np(v) for k, v in weights.items()},
                            int(mha.num_heads), bool(causal))


def _describe_mha(case):
    query, key, _, mha, causal = case.args
    return (f"multi_head_attention(query, key, value, mha, causal={bool(causal)}) with query "
            f"{dims('B, T_q, d_model', np.shape(query))}, key and value {dims('B, T_k, d_model', np.shape(key))}, "
            f"num_heads={mha.num_heads}")


def _mha_sizes(case):
    return attention_inputs(case).sizes


def _check_mha(case, result, call):
    inp = attention_inputs(case)
    sizes = inp.sizes
    got_out, got_w = read_pair(result, call, "out, weights")
    got_out = read_array(got_out, call, "the output")
    got_w = read_array(got_w, call, "the attention weights")
    if got_out.ndim == 4 and got_w.ndim == 3:
        raise Fail(f"{call} returned (weights, out): the first item has the weights' shape "
                   f"{tuple(got_out.shape)} and the second the output's {tuple(got_w.shape)}; return (out, weights).",
                   "pair in the wrong order")
    tol = max(arrays.tolerance(arrays.result_dtype(got_out)), arrays.tolerance(arrays.result_dtype(got_w)))
    want_out, want_w = attention.forward(inp)
    if case.expected is not None:
        want_out, want_w = (_np(e) for e in case.expected)
    cache: dict = {}

    def explain(_):
        if "combo" not in cache:
            cache["combo"] = _find_pair(got_out, got_w, inp, tol)
        combo = cache["combo"]
        if combo:
            return named(combo)
        return localise(got_out, got_w, inp, tol, want_out, want_w)
    compare(call, got_out, want_out, "B, T_q, d_model", "the output", tol, explain, sizes, shape_only=True)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, explain, sizes, shape_only=True)
    if case.check == "shape":
        return
    if case.check == "weights":
        return weight_properties(call, got_w, inp, tol)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, explain, sizes)
    compare(call, got_out, want_out, "B, T_q, d_model", "the output", tol, explain, sizes)


def _find_pair(got_out, got_w, inp, tol):
    for combo in variants.combos(attention.SWITCHES):
        keys = frozenset(s.key for s in combo)
        if not attention.compatible(keys):
            continue
        try:
            out, w = attention.forward(inp, keys)
        except Exception:  # noqa: BLE001
            continue
        if arrays.all_close(got_w, w, tol) and arrays.all_close(got_out, out, tol):
            return combo
    return None


def localise(got_out, got_w, inp, tol, want_out, want_w):
    """(label, sentence): where the answer first departs from the reference, when no variant explains it."""
    layout = attention.weights_layout_story(got_w, want_w, tol)
    if layout or got_w.shape != want_w.shape:
        return layout
    s = inp.sizes
    if not arrays.all_close(got_w, want_w, tol):
        if np.isnan(got_w).any():
            story = inp.causal and attention.mask_story(np.nan_to_num(got_w, nan=0.0), inp, tol)
            if story:  # the mask hides every key from some queries: their rows are NaN
                label, what, fix = story
                return label, f"The weights depart at the mask: {what}, so some rows hide every key; {fix}."
            return ("NaN in the weights", "NaN appears in the weights: a row whose scores are all -inf, or an "
                    "inf - inf, gives NaN.")
        rows_ok = np.allclose(got_w.sum(-1), 1.0, atol=100 * tol) and (got_w >= -tol).all()
        p = attention.dropout_rate(got_w, want_w, tol)
        if p is not None:
            return dropout_story(p)
        if not rows_ok:
            axis = attention.softmax_axis_story(got_w, tol)
            if axis:
                return (f"softmax over the wrong axis ({axis})", f"The weights depart at the softmax: they sum "
                        f"to 1 over {axis}, not over the keys; use torch.softmax(scores, dim=-1).")
            return ("departs at the softmax", "The weights depart at the softmax: each query's row should be a "
                    "distribution over the keys (non-negative, summing to 1): torch.softmax(scores, dim=-1)"
                    + (", with the mask applied to the scores before it." if inp.causal else "."))
        story = attention.mask_story(got_w, inp, tol)
        if story:
            label, what, fix = story
            return label, f"The weights depart at the mask: {what}; {fix}."
        scale = attention.fit_scale(got_w, inp)
        if scale is not None:
            name = attention.name_scale(scale, s)
            said = f"{scale:.4g}" + (f" = {name}" if name else "")
            label = f"scores divided by {name or 'a wrong factor'} instead of sqrt(d_k)"
            return label, (f"The weights depart at the scale: your scores are divided by {said}, not by "
                           f"sqrt(d_k) = {math.sqrt(s['d_k']):.4g} (d_k = d_model / h = {s['d_k']}); divide "
                           "q @ k.transpose(-2, -1) by math.sqrt(d_k).")
        per_head = attention.fit_scale_per_head(got_w, inp)
        if per_head is not None:
            said = ", ".join(f"{v:.3g}" for v in per_head)
            return ("scores divided by a different factor in each head", "The weights depart at the scale: each "
                    f"head's scores are divided by its own factor ({said}), not all by sqrt(d_k) = "
                    f"{math.sqrt(s['d_k']):.4g}; divide every head's scores by math.sqrt(d_k).")
        for sw in attention.SWITCHES:
            if attention.STAGE_OF[sw.key] > 1:
                continue
            scale = attention.fit_scale(got_w, inp, frozenset({sw.key}))
            if scale is None:
                continue
            off = "" if math.isclose(scale, math.sqrt(s["d_k"]), rel_tol=2e-3) else \
                f" and the scores are divided by {scale:.4g}, not sqrt(d_k) = {math.sqrt(s['d_k']):.4g}"
            label, text = named((sw,), f"The weights depart before the softmax, at the projection or the split{off}. ")
            return label + (" + wrong scale" if off else ""), text
        return ("departs before the softmax", "The weights depart before the softmax: the scores Q K^T differ "
                "from the reference; check the projections (rows 0:d and d:2d of mha.in_proj_weight, "
                "x @ W.T + b) and the split into heads ((B, T, h, d_k), then swap axes 1 and 2).")
    # the weights are right: the departure is after the softmax
    w_o, b_o = inp.weights["out_proj_weight"], inp.weights["out_proj_bias"]
    q, k, v, _ = attention.projections(inp)
    heads = want_w @ v                                        # (B, h, T_q, d_k)
    try:
        concat = (got_out - b_o) @ np.linalg.inv(w_o.T)       # what went into W^O
    except np.linalg.LinAlgError:
        concat = None
    if concat is not None:
        ref_concat = heads.transpose(0, 2, 1, 3).reshape(concat.shape)
        if arrays.all_close(concat, ref_concat, 1e-3):
            return ("departs at W^O", "The weights and the merged heads are right; the output departs at W^O: "
                    "F.linear(concat, mha.out_proj.weight, mha.out_proj.bias).")
        names = {"B": s["B"], "h": s["h"], "T_q": s["T_q"], "d_k": s["d_k"]}
        found = arrange.analyse(concat, heads, names, 1e-6)
        if found is not None and found.perm.index(2) < found.perm.index(0):
            return named((variants.Switch("", *variants.MERGE_B_T),), "The weights are right; the output "
                         f"departs at the merge: your heads are merged as {found.code('heads')}. ")
        if found is not None:
            return (f"heads merged as {found.code('heads')}", "The weights are right; the output departs at the "
                    f"merge: your heads are merged as {found.code('heads')}, not heads.transpose(1, 2)"
                    ".reshape(B, T_q, d_model).")
    k = float((got_out * want_out).sum() / max((want_out * want_out).sum(), 1e-300))
    if arrays.all_close(got_out, k * want_out, 10 * tol):
        return ("output scaled by a constant", f"The weights are right; the output is {k:.4g} times the right one: "
                "remove the extra factor (out = F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)).")
    return ("departs after the softmax", "The weights are right; the output departs after the softmax, in "
            "weights @ V (the value projection: rows 2d:3d of mha.in_proj_weight and b_v), the merge "
            "((B, h, T_q, d_k) -> (B, T_q, h, d_k) -> (B, T_q, d_model)) or W^O.")


def dropout_story(p: float) -> tuple[str, str]:
    return ("dropout applied to the weights", f"The weights depart after the softmax: some are 0 and the others "
            f"are scaled by 1/(1-p), dropout with p = {p:.2g} (F.dropout drops even outside training unless "
            "training=False): attention here has no dropout, remove it.")


WEIGHT_SWITCHES = [s for s in attention.SWITCHES if attention.STAGE_OF[s.key] in (4, 5)]


def weight_properties(call, w, inp, tol):
    """The weights are distributions over the keys and, if causal, give 0 to later keys; a failure
    is explained by the mask or softmax mistake (or pair) that gives exactly these weights."""
    problem = _weight_problem(w, inp, tol)
    if problem is None:
        return
    text, label, why = problem
    combo = find_variant(w, tol, WEIGHT_SWITCHES, lambda m: attention.forward(inp, m)[1], ok=attention.compatible)
    if combo:
        label, why = named(combo)
    raise Fail(f"{call}: {text} {why}", label)


def _weight_problem(w, inp, tol):
    """(what is wrong, label, why) or None."""
    layout = attention.weights_layout_story(w, attention.forward(inp)[1], tol)
    if layout:
        return ("the attention weights are not laid out as (B, h, T_q, T_k).", *layout)
    if np.isnan(w).any():
        return ("the attention weights contain NaN.", "NaN in the weights",
                "A softmax over a row whose scores are all -inf gives NaN: does your mask hide every key from "
                "some query?")
    if (w < -tol).any():
        return ("some attention weights are negative; a softmax gives weights in [0, 1].", "negative weights",
                "Return torch.softmax(scores, dim=-1).")
    rows = w.sum(axis=-1)
    if not np.allclose(rows, 1.0, atol=100 * tol):
        text = f"each query's weights over the keys should sum to 1; one row sums to " \
               f"{rows.flat[np.argmax(np.abs(rows - 1.0))]:.4g}."
        axis = attention.softmax_axis_story(w, tol)
        p = attention.dropout_rate(w, attention.forward(inp)[1], tol)
        if p is not None:
            return (text, *dropout_story(p))
        if axis:
            return (text, f"softmax over the wrong axis ({axis})",
                    f"They sum to 1 over {axis} instead: the softmax must run over the keys, dim=-1.")
        if inp.causal and attention.mask_story(w, inp, tol) is None:
            return (text, "mask applied after the softmax", "The future keys get weight 0 but the rows no longer "
                    "sum to 1: mask the scores with -inf before the softmax, not the weights after it.")
        return text, "weights are not a softmax over the keys", "Return torch.softmax(scores, dim=-1)."
    story = attention.mask_story(w, inp, tol)
    if story:
        label, what, fix = story
        return (f"with causal={inp.causal}, {what}.", label, fix[0].upper() + fix[1:] + ".")
    return None


def _per_head_sizes(case):
    b, h, t, d_v = np.shape(case.args[0])
    return {"B": b, "h": h, "T": t, "d_v": d_v, "d_model": np.shape(case.args[1])[1]}


def _fuse_sizes(case):
    d, d_k = np.shape(case.args[0][0])
    return {"h": len(case.args[0]), "d": d, "d_k": d_k}


ERROR_VARIANTS = {"project": _linear_runner("w", "b"), "output_projection": _linear_runner("w_o", "b_o"),
                  "output_projection_per_head": _per_head_runner}

SPECS = {
    "project": Spec(_describe_linear("project", "w", "b", "d_in, d_out", "B, T, d_in"),
                    _check_linear("w", "b", "B, T, d_out", variants.linear_switches("w", "b", "the product",
                                                                                   "(d_in, d_out)")),
                    _linear_sizes),
    "fuse_heads": Spec(_describe_fuse, _check_fuse, _fuse_sizes),
    "split_heads": Spec(lambda c: f"split_heads(x, num_heads={c.args[1]}) with x {dims('B, T, d', np.shape(c.args[0]))}",
                        _check_split, _split_sizes),
    "merge_heads": Spec(lambda c: f"merge_heads(x) with x {dims('B, h, T, d_v', np.shape(c.args[0]))}",
                        _check_merge, _merge_sizes),
    "output_projection": Spec(_describe_linear("output_projection", "w_o", "b_o", "h*d_v, d_model", "B, T, h*d_v"),
                              _check_linear("w_o", "b_o", "B, T, d_model",
                                            variants.linear_switches("w_o", "b_o", "W^O", "(h*d_v, d_model)")),
                              _linear_sizes),
    "output_projection_per_head": Spec(_describe_per_head, _check_per_head, _per_head_sizes),
    "multi_head_attention": Spec(_describe_mha, _check_mha, _mha_sizes),
}

