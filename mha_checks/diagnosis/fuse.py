"""Exercise 1, part B: fuse_heads. Diagnosis: the mistakes of :func:`mha_checks.variants.fuse`, then
the arrangement of the heads' elements (:mod:`mha_checks.arrange`)."""
import numpy as np

from .. import arrange, arrays, variants
from ..arrays import dims
from .common import Fail, _np, compare, find_variant, named, read_array, read_pair


def _fuse_sizes(case):
    d, d_k = np.shape(case.args[0][0])
    return {"h": len(case.args[0]), "d": d, "d_k": d_k}


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

