"""Exercise 1, part B: fuse_heads. Causes: the mistakes of :func:`mha_checks.variants.fuse`.
Observation when none reproduces: the arrangement of the heads' elements (:mod:`mha_checks.arrange`)."""
import numpy as np

from .. import arrange, arrays, variants
from ..arrays import dims
from .common import Fail, Spec, _np, compare, read_array, read_pair, same_array, same_pair


def _fuse_sizes(case):
    d, d_k = np.shape(case.args[0][0])
    return {"h": len(case.args[0]), "d": d, "d_k": d_k}


def _args(case):
    w_heads = [_np(a) for a in case.args[0]]
    b_heads = None if len(case.args) < 2 or case.args[1] is None else [_np(a) for a in case.args[1]]
    return w_heads, b_heads


def _describe_fuse(case):
    d, d_k = np.shape(case.args[0][0])
    b = "" if len(case.args) < 2 else ", None" if case.args[1] is None else ", b_heads"
    return f"fuse_heads(w_heads{b}) with h={len(case.args[0])} heads of {dims('d, d_k', (d, d_k))}"


def _check_fuse(case, result, call):
    w_heads, b_heads = _args(case)
    got_w, got_b = read_pair(result, call, "w, b", searchable=True)  # (a switch returns w alone)
    got_w = read_array(got_w, call, "the fused weight w")
    tol = arrays.tolerance(arrays.result_dtype(got_w))
    want_w, want_b = (tuple(_np(e) if e is not None else None for e in case.expected) if case.expected is not None
                      else variants.fuse(w_heads, b_heads))
    sizes = _fuse_sizes(case)

    def observe(g):
        found = arrange.analyse(g, np.stack(w_heads), sizes, tol)
        if found and not found.plain:
            return (f"heads arranged as {found.code('W')}", f"On this call your w holds the heads' elements as "
                    f"{found.code('W')} (W = np.stack(w_heads), (h, d, d_k)): put the blocks side by side "
                    "with np.concatenate(w_heads, axis=1).")
        return None
    compare(call, got_w, want_w, "d, h*d_k", "the fused weight w", tol, observe, sizes)
    if want_b is None:
        if got_b is not None:
            head = f"{call}: with b_heads=None the fused bias should be None too."
            raise Fail(head, "bias not None", head, searchable=True)
        return
    if got_b is None:
        head = f"{call}: the fused bias b is None; expected {dims('h*d_k', want_b.shape)}."
        raise Fail(head, "bias is None", head, searchable=True)
    got_b = read_array(got_b, call, "the fused bias b")
    compare(call, got_b, want_b, "h*d_k", "the fused bias b", tol, lambda g: None, sizes)


def _model(case, keys, call=None):
    args = variants.sixteen(_args(case)) if "half" in keys else _args(case)
    return variants.widened(variants.fuse(*args, keys)) if "half" in keys else variants.fuse(*args, keys)


def _same(case, got, predicted, dtype) -> bool:
    """A pair as :func:`same_pair`; where a switch returns w alone, one array as :func:`same_array`."""
    if isinstance(predicted, tuple):
        return same_pair(case, got, predicted, dtype)
    return not isinstance(got, tuple | list) and same_array(case, got, predicted, dtype)


SPEC = Spec(_describe_fuse, _check_fuse, _fuse_sizes, _model, lambda case, got: variants.FUSE_SWITCHES, _same)
