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


def named(switches, prefix: str = "") -> tuple[str, str]:
    """(label, sentence) for one or two mistakes; for a list of such combinations (each reproduces the
    answer: the numbers of this call cannot tell them apart), all of them as alternatives."""
    if isinstance(switches, list):
        if len(switches) == 1:
            return named(switches[0], prefix)
        options = [named(c) for c in switches]
        return " or ".join(label for label, _ in options), (
            f"{prefix}The numbers here fit {len(options)} known mistakes equally (each gives exactly your "
            "result on this call): " + "; or ".join(f"{label} ({c[0].fix})" if len(c) == 1 else label
                                                   for (label, _), c in zip(options, switches)) + ".")
    label = " + ".join(s.label for s in switches)
    if len(switches) == 1:
        s = switches[0]
        return label, f"{prefix}This is a known mistake, {s.label}: {s.fix}."
    a, b = switches
    return label, f"{prefix}Two mistakes at once: {a.label} ({a.fix}), and {b.label} ({b.fix})."


def find_variant(got, tol: float, switches: list, compute: Callable, pick: Callable = lambda r: r,
                 ok: Callable = lambda keys: True) -> list[tuple]:
    """The mistakes (or the first pair) whose result equals ``got``: every single mistake that does,
    else the first pair that does, else [] (nothing is named that does not reproduce ``got``)."""
    return first_matches(switches, lambda combo: _gives(got, tol, compute, pick, combo), ok)


def first_matches(switches: list, matches: Callable, ok: Callable = lambda keys: True) -> list[tuple]:
    """Every single switch whose combination ``matches``; if none, the first matching pair, as a list."""
    found = []
    for combo in variants.combos(switches):
        if len(combo) == 2 and found:
            break
        if ok(frozenset(s.key for s in combo)) and matches(combo):
            found.append(combo)
            if len(combo) == 2:
                break
    return found


def _gives(got, tol, compute, pick, combo) -> bool:
    try:
        value = pick(compute(frozenset(s.key for s in combo)))
    except Exception:  # noqa: BLE001 - a mistake that cannot run here explains nothing
        return False
    return value is not None and arrays.all_close(got, value, tol)


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
        first = tuple(int(i) for i in np.argwhere(np.isnan(got))[0])
        raise Fail(f"{call}: NaN in {what} (first at index {first}), where the right answer has none."
                   + (" " + found[1] if found else ""), found[0] if found else "NaN in the result")
    found = explain(got)
    if (found is None or found[0] in VAGUE) and arrays.half_precision_only(got, want):
        found = ("precision lost (16-bit arithmetic inside)", f"Your values are right to about 3 digits only, as if "
                 f"computed in float16 (or bfloat16) and converted back to {got.dtype}, which is held to 1e-5: "
                 "compute in float32 or float64, or return the 16-bit result as it is.")
    where = arrays.first_difference(got, want, tol)
    label, text = found or ("wrong values", "Check each step against the worked example." + sizes_note(sizes))
    text = text if text.endswith(".") else text + "."
    raise Fail(f"{call}: wrong values in {what} ({where}). {text}", label)


VAGUE = {"not a linear map of x", "departs before the softmax", "departs at the softmax", "departs after the softmax"}


def sizes_note(sizes: dict) -> str:
    if sizes and len(set(sizes.values())) == len(sizes):
        return (" The sizes here are all different (" + ", ".join(f"{k}={v}" for k, v in sizes.items())
                + "): code that only works when some of them are equal fails on them.")
    return ""

