"""Exercise 3: merge_heads. Diagnosis: the mistakes of :func:`mha_checks.variants.merge`, then which
reshape/transpose produced the result (:mod:`mha_checks.arrange`)."""
import numpy as np

from .. import arrange, arrays, variants
from .common import _np, compare, find_variant, named, read_array


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

