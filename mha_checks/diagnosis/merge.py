"""Exercise 3: merge_heads. Causes: the mistakes of :func:`mha_checks.variants.merge`, and the
reshape/transpose that produced the failing answer (:mod:`mha_checks.arrange`), applied to every call.
Observation when none reproduces: that arrangement on this call."""
import numpy as np

from .. import arrays, variants
from .common import Spec, _np, compare, read_array, same_array
from .split import _arrangement


def _merge_sizes(case):
    b, h, t, d_v = np.shape(case.args[0])
    return {"B": b, "h": h, "T": t, "d_v": d_v}


def _check_merge(case, result, call):
    x = _np(case.args[0])
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    want = _np(case.expected) if case.expected is not None else variants.merge(x)

    def observe(g):
        found = _arrangement(g, x, _merge_sizes(case))
        if found is None or found.plain:
            return None
        return (f"elements arranged as {found.code()}", f"On this call your result is {found.code()}: "
                f"{variants.MERGE_FIX}.")
    compare(call, got, want, "B, T, h*d_v", "the result", tol, observe, _merge_sizes(case), case.check == "shape")


def _model(case, keys, call=None):
    x = _np(case.args[0])
    return variants.merge(variants.sixteen(x) if "half" in keys else x, keys)


def _switches(case, got) -> list:
    """The merge's catalogue, and the arrangement the failing answer holds (if it is one)."""
    x, sizes = _np(case.args[0]), _merge_sizes(case)
    found = _arrangement(got, x, sizes)
    catalogue = variants.MERGE_SWITCHES + list(variants.GENERIC)
    if found is None:
        return catalogue
    b, h, t, d_v = x.shape
    own = np.shape(got) != (b, t, h * d_v)
    if found.plain:
        return catalogue + ([] if own else [variants.arrangement_switch(found, own, variants.MERGE_PLAIN, "")])
    story = variants.MERGE_NAMES.get((found.order, found.perm))
    if story is None and found.order == tuple(sizes) and found.perm.index(2) < found.perm.index(0):
        story = variants.MERGE_B_T
    return catalogue + [variants.arrangement_switch(found, own, story, variants.MERGE_FIX)]


SPEC = Spec(lambda c: f"merge_heads(x) with x {arrays.dims('B, h, T, d_v', np.shape(c.args[0]))}",
            _check_merge, _merge_sizes, _model, _switches, same_array)
