"""Exercise 4, part B: output_projection_per_head. Diagnosis: the mistakes of
:func:`mha_checks.variants.per_head`, then a fit of the result as a linear map of the merged heads."""
import numpy as np

from .. import arrays, variants
from ..arrays import dims
from .common import _np, compare, find_variant, named, read_array
from .linear import linear_fit


def _per_head_sizes(case):
    b, h, t, d_v = np.shape(case.args[0])
    return {"B": b, "h": h, "T": t, "d_v": d_v, "d_model": np.shape(case.args[1])[1]}


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

