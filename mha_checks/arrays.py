"""Arrays as the judge sees them: the tolerance policy, shapes with axis names, first differences.

The tolerance policy (one for every exercise, stated here and in the messages):
an answer is right when every element is within ``tol * (|expected| + scale)`` of the float64
reference, where ``scale`` is the largest |expected| value (at least 1) and
``tol = max(1e-5, 32 * eps)`` with ``eps`` the machine epsilon of the answer's dtype
(1e-5 for float64 and float32 answers, 3.1e-2 for float16). A bfloat16 tensor arrives as
float16 (NumPy has no bfloat16; float16 holds its values exactly) and is graded as a 16-bit
float; extended precision (np.longdouble) arrives as float64. The same test decides pass/fail,
finds the first difference, and matches a known mistake.
"""
import numpy as np

from . import calling


def tolerance(dtype) -> float:
    """The relative tolerance for an answer of this dtype (integers are exact: float64's)."""
    dtype = np.dtype(dtype)
    eps = np.finfo(dtype).eps if np.issubdtype(dtype, np.floating) else np.finfo(np.float64).eps
    return max(1e-5, 32 * float(eps))


def half_precision_only(got, want) -> bool:
    """``got`` (not a 16-bit answer) is right only to float16's tolerance: rounded through 16 bits."""
    got = np.asarray(got)
    return got.dtype.itemsize > 2 and all_close(got, want, tolerance(np.float16))


def close(got: np.ndarray, want: np.ndarray, tol: float) -> np.ndarray:
    """Element-wise: is ``got`` within the policy of ``want``? (NaN where ``want`` is NaN too is equal.)"""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    finite = want[np.isfinite(want)]
    scale = max(1.0, float(np.abs(finite).max(initial=0.0)))
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(got - want) <= tol * (np.abs(want) + scale)
    return ok | (np.isnan(got) & np.isnan(want)) | ((got == want) & np.isinf(want))


def all_close(got, want, tol: float) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and bool(close(got, want, tol).all())


def first_difference(got: np.ndarray, want: np.ndarray, tol: float) -> str:
    """'at index (0, 1, 2) expected 0.5, got 0.7' (the same test as :func:`close`; never raises)."""
    bad = np.argwhere(~close(got, want, tol))
    if not len(bad):
        return "no element differs"
    idx = tuple(int(i) for i in bad[0])
    return f"at index {idx} expected {_num(want[idx])}, got {_num(got[idx])}"


def _num(v) -> str:
    return f"{float(v):.4g}"


def dims(names: str, shape) -> str:
    """'(B, T, d) = (2, 5, 12)': a shape next to the names of its axes."""
    shape = tuple(int(s) for s in shape)
    labels = [n.strip() for n in names.split(",")]
    if len(labels) != len(shape):
        return str(shape)
    return f"({', '.join(labels)}) = {shape}"


class NotAnArray(Exception):
    """The value cannot be read as one numeric array; the message says what it is."""


def as_array(value) -> np.ndarray:
    """A decoded value (NumPy array, decoded tensor, number, nested list of numbers) as an array.

    Raises :class:`NotAnArray` with a description of anything else.
    """
    if value is None:
        raise NotAnArray("None")
    if isinstance(value, calling.Other):
        raise NotAnArray(with_article(value))
    if isinstance(value, str):
        raise NotAnArray("a string")
    if isinstance(value, tuple) and not _numeric_nest(value):
        raise NotAnArray(f"a tuple of {len(value)}")
    if isinstance(value, list) and not _numeric_nest(value):
        raise NotAnArray(f"a list of {len(value)}")
    if isinstance(value, dict):
        raise NotAnArray("a dict")
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - any odd value is described, not raised
        raise NotAnArray(type(value).__name__) from None
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.number)):
        raise NotAnArray(f"an array of {a.dtype}")
    if np.issubdtype(a.dtype, np.complexfloating):
        raise NotAnArray("a complex array")
    return np.asarray(a).view(np.ndarray)


def with_article(text: str) -> str:
    """'a generator' for 'generator'; 'an array of ...' stays as it is."""
    return text if text.startswith(("a ", "an ")) else f"a {text}"


def _numeric_nest(value, depth: int = 0) -> bool:
    if isinstance(value, tuple | list):
        return depth < 6 and len(value) > 0 and all(_numeric_nest(v, depth + 1) for v in value) \
            and len({_depth(v) for v in value}) == 1
    return isinstance(value, int | float) and not isinstance(value, bool) or \
        (isinstance(value, np.ndarray) and value.ndim == 0)


def _depth(value) -> int:
    return 1 + _depth(value[0]) if isinstance(value, tuple | list) and value else 0


def result_dtype(value) -> np.dtype:
    try:
        a = np.asarray(value)
        return a.dtype if np.issubdtype(a.dtype, np.floating) else np.dtype(np.float64)
    except Exception:  # noqa: BLE001
        return np.dtype(np.float64)
