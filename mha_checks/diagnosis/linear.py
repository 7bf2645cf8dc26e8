"""Exercises 1 and 4: a linear map ``x @ w + b`` (project, output_projection).

Causes: the mistakes of :func:`mha_checks.variants.linear`, and a constant factor on the product fitted
on the failing call (named only where it holds on every call). Observation when none reproduces: a fit
of this call's answer as ``x @ M + c``, compared with ``w`` and ``b`` (verified on this call)."""
import numpy as np

from .. import arrays, variants
from ..arrays import dims
from .common import Spec, _np, compare, read_array, same_array


def _linear_sizes(case):
    x, w = case.args[0], case.args[1]
    lead = ["B", "T"] if np.ndim(x) == 3 else ["T"]
    return dict(zip(lead, np.shape(x)[:-1])) | {"d_in": w.shape[0], "d_out": w.shape[1]}


def _args(case):
    x, w, b = (list(case.args) + [None])[:3]
    return _np(x), _np(w), _np(b)


def _describe_linear(name: str, wname: str, bname: str, wlayout: str, xlayout: str):
    def describe(case):
        x, w = case.args[:2]
        b = f", {bname}" if len(case.args) > 2 and case.args[2] is not None else ", None" if len(case.args) > 2 else ""
        xl = xlayout if np.ndim(x) == 3 else xlayout.split(", ", 1)[1]
        return f"{name}(x, {wname}{b}) with x {dims(xl, np.shape(x))}, {wname} {dims(wlayout, np.shape(w))}"
    return describe


def linear_fit(got, x, w, b, tol, wname: str, bname: str):
    """(label, sentence): this call's answer as x @ M + c compared with w and b, when enough rows make M
    unique and the fit holds to the grade's tolerance (an observation of this call, no cause)."""
    d_in, d_out = w.shape
    X, Y = x.reshape(-1, d_in), got.reshape(-1, d_out)
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    if X.shape[0] < d_in + 2 or np.linalg.matrix_rank(A) < d_in + 1:  # M and c are not determined here
        return None
    coef, *_ = np.linalg.lstsq(A, Y, rcond=None)
    if not arrays.all_close(A @ coef, Y, tol):
        return ("not a linear map of x", f"On this call your result is not x @ M + c for any M and c: use the "
                f"matrix product x @ {wname}, then add {bname}.")
    M, c = coef[:-1], coef[-1]
    close = lambda a, b_: arrays.all_close(a, b_, tol)  # noqa: E731
    parts = []
    if not close(M, w):
        s = float((M * w).sum() / max((w * w).sum(), 1e-300))
        parts.append(f"the product is {s:.4g} * x @ {wname}" if close(M, s * w) else
                     f"the product uses {wname}.T" if w.shape[0] == w.shape[1] and close(M, w.T) else
                     f"the product is not x @ {wname}")
    want_c = np.zeros(d_out) if b is None else b
    if not close(c, want_c):
        k = 0.0 if b is None else float((c * b).sum() / max((b * b).sum(), 1e-300))
        parts.append(f"a constant is added although {bname} is None" if b is None else f"{bname} is not added"
                     if close(c, 0 * b) else f"the constant added is {k:.4g} * {bname}" if close(c, k * b) else
                     f"the constant added is not {bname}")
    if not parts:
        return None
    want = f"x @ {wname}" + ("" if b is None else f" + {bname}")
    return "differs from x @ w + b", (f"On this call your result is x @ M + c, but {' and '.join(parts)}: "
                                      f"compute {want}.")


def _check_linear(wname, bname, out_axes):
    def check(case, result, call):
        x, w, b = _args(case)
        got = read_array(result, call)
        tol = arrays.tolerance(arrays.result_dtype(got))
        want = _np(case.expected) if case.expected is not None else variants.linear(x, w, b)
        axes = out_axes if x.ndim == 3 else out_axes.split(", ", 1)[1]

        def observe(g):
            if g.shape == want.shape and case.expected is None and not arrays.half_precision_only(g, want):
                return linear_fit(g, x, w, b, tol, wname, bname)
            return None
        compare(call, got, want, axes, "the result", tol, observe, _linear_sizes(case), case.check == "shape")
    return check


def _model(case, keys, call=None):
    x, w, b = variants.sixteen(_args(case)) if "half" in keys else _args(case)
    return variants.linear(x, w, b, keys)


def _switches(wname: str, bname: str, product: str, layout: str):
    catalogue = variants.linear_switches(wname, bname, product, layout) + list(variants.GENERIC)

    def switches(case, got):
        x, w, b = _args(case)
        try:  # a constant factor on the product, fitted on this call (checked on every call by the search)
            xw, rest = x @ w, arrays.as_array(got) - (0 if b is None else b)
            with np.errstate(all="ignore"):
                factor = float((rest * xw).sum() / (xw * xw).sum())
        except Exception:  # noqa: BLE001 - an answer of another shape fits no factor
            return catalogue
        return catalogue + ([variants.scaled_by(factor, wname)] if np.isfinite(factor) and factor != 0 else [])
    return switches


def spec(name: str, wname: str, bname: str, wlayout: str, xlayout: str, out_axes: str, product: str) -> Spec:
    return Spec(_describe_linear(name, wname, bname, wlayout, xlayout), _check_linear(wname, bname, out_axes),
                _linear_sizes, _model, _switches(wname, bname, product, f"({wlayout})"), same_array)
