"""Exercise 2: split_heads. Causes: a split along time, and the reshape/transpose that produced the
failing answer (:mod:`mha_checks.arrange`), applied to every call. Observation when none reproduces:
that arrangement on this call."""
import numpy as np

from .. import arrange, arrays, variants
from .common import Spec, _np, compare, read_array, same_array


def _split_sizes(case):
    (b, t, d), h = np.shape(case.args[0]), int(case.args[1])
    return {"B": b, "T": t, "h": h, "d_k": d // max(h, 1)}


def _check_split(case, result, call):
    x, h = _np(case.args[0]), int(case.args[1])
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    want = _np(case.expected) if case.expected is not None else variants.split(x, h)

    def observe(g):
        found = arrange.analyse(g, x, _split_sizes(case), tol)
        if found is None or found.plain:
            return None
        return (f"elements arranged as {found.code()}", f"On this call your result is {found.code()}: "
                f"{variants.SPLIT_FIX}.")
    compare(call, got, want, "B, h, T, d_k", "the result", tol, observe, _split_sizes(case), case.check == "shape")


def _model(case, keys, call=None):
    x = _np(case.args[0])
    return variants.split(variants.sixteen(x) if "half" in keys else x, int(case.args[1]), keys)


def _switches(case, got) -> list:
    """The split's catalogue, and the arrangement the failing answer holds (if it is one)."""
    x, sizes = _np(case.args[0]), _split_sizes(case)
    found = _arrangement(got, x, sizes)
    if found is None:
        return variants.SPLIT_SWITCHES + list(variants.GENERIC)
    asked = (sizes["B"], sizes["h"], sizes["T"], sizes["d_k"])
    own = np.shape(got) != asked
    story = variants.SPLIT_NAMES["plain"] if found.plain and not own else \
        variants.SPLIT_NAMES.get((found.order, found.perm)) or \
        (variants.B_T_MIXED if found.order.index("T") < found.order.index("B") else None)
    return variants.SPLIT_SWITCHES + list(variants.GENERIC) + [
        variants.arrangement_switch(found, own, story, variants.SPLIT_FIX)]


def _arrangement(got, x, sizes):
    try:
        g = arrays.as_array(got)
    except Exception:  # noqa: BLE001 - not an array: no arrangement
        return None
    return arrange.analyse(g, x, sizes, arrays.tolerance(arrays.result_dtype(g)))


SPEC = Spec(lambda c: f"split_heads(x, num_heads={c.args[1]}) with x "
                      f"{arrays.dims('B, T, d', np.shape(c.args[0]))}",
            _check_split, _split_sizes, _model, _switches, same_array)
