"""Exercise 4, part B: output_projection_per_head. Causes: the mistakes of
:func:`mha_checks.variants.per_head`. Observations when none reproduces: which heads' terms this call's
answer holds, or a fit of it as a linear map of the merged heads (each verified on this call)."""
from itertools import combinations

import numpy as np

from .. import arrays, variants
from ..arrays import dims
from .common import Spec, _np, compare, read_array, same_array
from .linear import linear_fit


def _per_head_sizes(case):
    b, h, t, d_v = np.shape(case.args[0])
    return {"B": b, "h": h, "T": t, "d_v": d_v, "d_model": np.shape(case.args[1])[1]}


def _args(case):
    heads, w_o, b_o = (list(case.args) + [None])[:3]
    return _np(heads), _np(w_o), _np(b_o)


def _describe_per_head(case):
    b = "" if len(case.args) < 3 else ", None" if case.args[2] is None else ", b_o"
    return (f"output_projection_per_head(heads, w_o{b}) with heads "
            f"{dims('B, h, T, d_v', np.shape(case.args[0]))}, w_o {dims('h*d_v, d_model', np.shape(case.args[1]))}")


def _check_per_head(case, result, call):
    heads, w_o, b_o = _args(case)
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    want = _np(case.expected) if case.expected is not None else variants.per_head(heads, w_o, b_o)

    def observe(g):
        story = None if case.expected is not None else heads_kept(g, heads, w_o, b_o, tol)
        if story or g.shape != want.shape or case.expected is not None or arrays.half_precision_only(g, want):
            return story
        fit = linear_fit(g, variants.merge(heads), w_o, b_o, tol, "w_o", "b_o")
        if fit:
            label, text = fit
            head, _, _ = text.rpartition(": compute ")
            return label, (head.replace("x @ M + c", "concat @ M + c").replace("of x", "of the heads")
                           + ": compute the sum over heads of heads[:, i] @ w_o[i*d_v:(i+1)*d_v]"
                           + ("." if b_o is None else ", plus b_o once."))
        return None
    compare(call, got, want, "B, T, d_model", "the result", tol, observe, _per_head_sizes(case))


def heads_kept(g, heads, w_o, b_o, tol) -> tuple[str, str] | None:
    """(label, sentence) when this call's answer sums the terms head_i @ W^O_i of only some heads (b_o added
    once, or not at all): checked against the numbers, never guessed."""
    b, h, t, d_v = heads.shape
    terms = [heads[:, i] @ w_o[i * d_v:(i + 1) * d_v] for i in range(h)]       # h x (B, T, d_model)
    bias = 0.0 if b_o is None else b_o
    for size in range(h - 1, -1, -1):                                       # most heads kept first
        for kept in combinations(range(h), size):
            total = sum((terms[i] for i in kept), np.zeros_like(terms[0]))
            if any(arrays.all_close(g, v, tol) for v in (total + bias, total)):
                missing = [i for i in range(h) if i not in kept]
                return ("sums only some heads", f"On this call your result sums the terms head_i @ W^O_i of heads "
                        f"{list(kept)} only, of the h = {h}: head{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(str, missing))} {'are' if len(missing) > 1 else 'is'} missing; sum over "
                        "every head, range(h).")
    return None


def _model(case, keys, call=None):
    return variants.per_head(*(variants.sixteen(_args(case)) if "half" in keys else _args(case)), keys)


SPEC = Spec(_describe_per_head, _check_per_head, _per_head_sizes, _model,
            lambda case, got: variants.PER_HEAD_SWITCHES + list(variants.GENERIC), same_array)
