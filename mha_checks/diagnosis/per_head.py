"""Exercise 4, part B: output_projection_per_head. Diagnosis: the mistakes of
:func:`mha_checks.variants.per_head`, then a fit of the result as a linear map of the merged heads."""
from itertools import combinations

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
        story = None if case.expected is not None else heads_story(g, heads, w_o, b_o, tol)
        if story:
            return story
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



def heads_story(g, heads, w_o, b_o, tol) -> tuple[str, str] | None:
    """(label, sentence) when ``g`` is the heads' terms head_i @ W^O_i not summed, or summed over only some
    heads (b_o added once, or not at all): each checked against the numbers, never guessed."""
    b, h, t, d_v = heads.shape
    terms = [heads[:, i] @ w_o[i * d_v:(i + 1) * d_v] for i in range(h)]       # h x (B, T, d_model)
    bias = 0.0 if b_o is None else b_o
    if arrays.all_close(g, np.stack(terms, axis=1) + bias, tol) or arrays.all_close(g, np.stack(terms, axis=1), tol):
        return ("heads projected but never summed", "Heads projected but never summed: your result holds every "
                "head's term head_i @ W^O_i, "
                f"(B, h, T, d_model) = {tuple(g.shape)}, each right, but not their sum: add them over the heads "
                "(axis 1), then add b_o once.")
    for size in range(h - 1, -1, -1):                                       # most heads kept first
        for kept in combinations(range(h), size):
            total = sum((terms[i] for i in kept), np.zeros_like(terms[0]))
            sums = [total + bias, total] + ([np.asarray(bias)] if size == 0 else [])  # sum() of nothing is 0
            if any(arrays.all_close(g, v, tol) for v in sums):
                missing = [i for i in range(h) if i not in kept]
                return ("heads left out of the sum", "Heads left out of the sum: your result sums the terms "
                        f"head_i @ W^O_i of heads "
                        f"{list(kept)} only, of the h = {h}: head{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(str, missing))} {'are' if len(missing) > 1 else 'is'} missing; sum over "
                        "every head, range(h).")
    return None
