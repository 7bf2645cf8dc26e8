"""Exercises 1 and 4: a linear map ``x @ w + b`` (project, output_projection). Diagnosis: the
mistakes of :func:`mha_checks.variants.linear` alone and two at a time, then a fit of the result as
``x @ M + c`` compared with ``w`` and ``b``."""
import numpy as np

from .. import arrays, variants
from ..arrays import dims
from .common import _np, compare, find_variant, named, read_array


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

