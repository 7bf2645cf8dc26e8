"""Exercise 2: split_heads. Diagnosis: which reshape/transpose produced the result (:mod:`mha_checks.arrange`)."""
import numpy as np

from .. import arrange, arrays, variants
from .common import _np, compare, named, read_array


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

