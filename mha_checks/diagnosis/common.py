"""What every exercise's diagnosis shares: the failure a check raises, reading an answer, comparing it
with the reference (shape, then values: an observation of what differs), and how an answer is compared
with a switch's result. The cause search that names a catalogued mistake only where it reproduces the
answer on every call of the test is :mod:`.search`."""
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import arrays, calling
from ..arrays import NotAnArray, dims


class Fail(Exception):
    """Raised by a check with the verdict's message and label. ``head`` is the observation alone (what
    differs, where, by how much), to which a reproduced cause is appended in place of the rest;
    ``searchable``: the answer was read (values, a shape or an error), so a switch may reproduce it."""

    def __init__(self, message: str, mistake: str, head: str | None = None, searchable: bool = False):
        super().__init__(message)
        self.message, self.mistake = message, mistake
        self.head, self.searchable = head or message, searchable


@dataclass(frozen=True)
class Spec:
    describe: Callable   # case -> "split_heads(x, num_heads=3) with x (B, T, d) = (2, 5, 12)"
    check: Callable      # (case, decoded result, call) -> None, or raises Fail (an observation)
    sizes: Callable      # case -> {"B": 2, ...}: the named sizes of the case
    model: Callable      # (case, switch keys, Call or None) -> what the function returns with those mistakes
                         # (or raises); the Call is read only by a switch fitted to the answer (a dropout's zeros)
                         # or to the calls made before it in the same process (state kept between calls)
    switches: Callable   # (case, the answer that failed) -> the catalogue of switches tried
    same: Callable       # (case, answer, model's result, dtype or None) -> the answer is the model's
    compatible: Callable = lambda keys: True  # may these switches be on together?


def _np(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def read_array(value, call: str, what: str = "the result") -> np.ndarray:
    try:
        return arrays.as_array(value)
    except NotAnArray as err:
        if value is None:
            text = (f"{call} returned None: is a `return` missing?" if what == "the result"
                    else f"{call}: {what} is None; expected an array.")
            raise Fail(text, "returns None") from None
        if "dtype" in str(err):
            raise Fail(f"{call}: {what} is {err}, which cannot be checked: return float16, float32 or float64 "
                       "values.", "unreadable dtype") from None
        raise Fail(f"{call}: {what} is {err}; expected one array (NumPy or torch).", "not an array") from None


def read_pair(value, call: str, names: str, searchable: bool = False) -> tuple:
    """``value`` as a pair, or a Fail; ``searchable``: a catalogued switch may return another form (searched)."""
    if isinstance(value, tuple | list) and len(value) == 2:
        return tuple(value)
    if value is None:
        raise Fail(f"{call} returned None: is a `return` missing? It should return a pair ({names}).",
                   "returns None")
    what = f"a {type(value).__name__} of {len(value)}" if isinstance(value, tuple | list) else \
        "one array" if isinstance(value, np.ndarray) else arrays.with_article(str(value)) \
        if isinstance(value, calling.Other) else f"a {type(value).__name__}"
    head = f"{call} returned {what}; expected a pair ({names})."
    raise Fail(f"{head[:-1]}: return {names}.", "not a pair", head, searchable)


# --- the observation of one call ----------------------------------------------------------------------

def compare(call: str, got: np.ndarray, want: np.ndarray, axes: str, what: str, tol: float,
            observe: Callable, sizes: dict, shape_only: bool = False) -> None:
    """Fail unless ``got`` matches ``want`` (shape, then values). ``observe(got)``: (label, sentence) of
    what this call's answer shows, verified on it, or None; never a cause (see :func:`search`)."""
    if got.shape != want.shape:
        order = " (the right sizes in the wrong order: check which axes you swap)" \
            if sorted(got.shape) == sorted(want.shape) else ""
        head = f"{call}: wrong shape for {what}: {tuple(got.shape)}; expected {dims(axes, want.shape)}{order}."
        label, text = observe(got) or ("wrong shape", sizes_note(sizes).strip())
        raise Fail(f"{head} {text}".rstrip(), label, head, searchable=True)
    if shape_only or arrays.all_close(got, want, tol):
        return
    if np.isnan(got).any() and not np.isnan(want).any():
        first = tuple(int(i) for i in np.argwhere(np.isnan(got))[0])
        head = f"{call}: NaN in {what} (first at index {first}), where the right answer has none."
        found = observe(got)
        raise Fail(f"{head} {found[1]}" if found else head, found[0] if found else "NaN in the result", head,
                   searchable=True)
    head = f"{call}: wrong values in {what} ({arrays.first_difference(got, want, tol)})."
    label, text = observe(got) or ("wrong values", "Check each step against the worked example." + sizes_note(sizes))
    raise Fail(f"{head} {text}", label, head, searchable=True)


def sizes_note(sizes: dict) -> str:
    if sizes and len(set(sizes.values())) == len(sizes):
        return (" The sizes here are all different (" + ", ".join(f"{k}={v}" for k, v in sizes.items())
                + "): code that only works when some of them are equal fails on them.")
    return ""


# --- how an answer is compared with a switch's result ------------------------------------------------

def same_array(case, got, predicted, dtype) -> bool:
    """One array (exercises 1-4): the same shape, and in a values test the same values."""
    got, predicted = arrays.as_array(got), np.asarray(predicted)
    if got.shape != predicted.shape or case.check == "shape":
        return got.shape == predicted.shape
    return arrays.all_close(got, predicted, arrays.tolerance(dtype or arrays.result_dtype(got)))


def same_pair(case, got, predicted, dtype) -> bool:
    """A pair of arrays (either may be None where the switch's is): each as :func:`same_array`."""
    if not isinstance(got, tuple | list) or len(got) != 2:
        return False
    return all((g is None) if p is None else (g is not None and same_array(case, g, p, dtype))
               for g, p in zip(got, predicted))
