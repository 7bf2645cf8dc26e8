"""What every exercise's diagnosis shares: the failure a check raises, reading an answer, comparing it
with the reference (shape, then values) and naming a catalogued mistake once it reproduces the answer."""
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import arrays, calling, variants
from ..arrays import NotAnArray, dims


class Fail(Exception):
    """Raised inside the judge with the verdict's message and mistake label."""

    def __init__(self, message: str, mistake: str):
        super().__init__(message)
        self.message, self.mistake = message, mistake


@dataclass(frozen=True)
class Spec:
    describe: Callable   # case -> "split_heads(x, num_heads=3) with x (B, T, d) = (2, 5, 12)"
    check: Callable      # (case, decoded result, call) -> None, or raises Fail
    sizes: Callable      # case -> {"B": 2, ...}: the named sizes of the case


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


def read_pair(value, call: str, names: str) -> tuple:
    if isinstance(value, tuple | list) and len(value) == 2:
        return tuple(value)
    if value is None:
        raise Fail(f"{call} returned None: is a `return` missing? It should return a pair ({names}).",
                   "returns None")
    what = f"a {type(value).__name__} of {len(value)}" if isinstance(value, tuple | list) else \
        "one array" if isinstance(value, np.ndarray) else arrays.with_article(str(value)) \
        if isinstance(value, calling.Other) else f"a {type(value).__name__}"
    raise Fail(f"{call} returned {what}; expected a pair ({names}): return {names.replace(', ', ', ')}.",
               "not a pair")


def named(switches: tuple, prefix: str = "") -> tuple[str, str]:
    """(label, sentence) for one or two mistakes."""
    label = " + ".join(s.label for s in switches)
    if len(switches) == 1:
        s = switches[0]
        return label, f"{prefix}This is a known mistake, {s.label}: {s.fix}."
    a, b = switches
    return label, f"{prefix}Two mistakes at once: {a.label} ({a.fix}), and {b.label} ({b.fix})."


def find_variant(got, tol: float, switches: list, compute: Callable, pick: Callable = lambda r: r,
                 ok: Callable = lambda keys: True):
    """The first mistake (or pair) whose result equals ``got``."""
    for combo in variants.combos(switches):
        keys = frozenset(s.key for s in combo)
        if not ok(keys):
            continue
        try:
            value = pick(compute(keys))
        except Exception:  # noqa: BLE001 - a mistake that cannot run here explains nothing
            continue
        if value is not None and arrays.all_close(got, value, tol):
            return combo
    return None


def compare(call: str, got: np.ndarray, want: np.ndarray, axes: str, what: str, tol: float,
            explain: Callable, sizes: dict, shape_only: bool = False) -> None:
    """Fail unless ``got`` matches ``want`` (shape, then values); ``explain(got)`` names the mistake."""
    if got.shape != want.shape:
        order = " (the right sizes in the wrong order: check which axes you swap)" \
            if sorted(got.shape) == sorted(want.shape) else ""
        label, text = explain(got) or ("wrong shape", "")
        raise Fail(f"{call}: wrong shape for {what}: {tuple(got.shape)}; expected {dims(axes, want.shape)}{order}."
                   + (" " + text if text else sizes_note(sizes)), label)
    if shape_only:
        return
    if arrays.all_close(got, want, tol):
        return
    if np.isnan(got).any() and not np.isnan(want).any():
        found = explain(got)
        raise Fail(f"{call}: NaN in {what}. A softmax over a row whose scores are all -inf gives NaN: "
                   "does a mask hide every key from some query?" + (" " + found[1] if found else ""),
                   found[0] if found else "NaN in the result")
    found = explain(got)
    if (found is None or found[0] in VAGUE) and arrays.half_precision_only(got, want):
        found = ("precision lost (16-bit arithmetic inside)", f"Your values are right to about 3 digits only, as if "
                 f"computed in float16 (or bfloat16) and converted back to {got.dtype}, which is held to 1e-5: "
                 "compute in float32 or float64, or return the 16-bit result as it is.")
    where = arrays.first_difference(got, want, tol)
    label, text = found or ("wrong values", "Check each step against the worked example." + sizes_note(sizes))
    raise Fail(f"{call}: wrong values in {what} ({where}). {text}", label)


VAGUE = {"not a linear map of x", "departs before the softmax", "departs at the softmax", "departs after the softmax"}


def sizes_note(sizes: dict) -> str:
    if sizes and len(set(sizes.values())) == len(sizes):
        return (" The sizes here are all different (" + ", ".join(f"{k}={v}" for k, v in sizes.items())
                + "): code that only works when some of them are equal fails on them.")
    return ""

