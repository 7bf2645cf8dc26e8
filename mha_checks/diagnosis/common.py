"""What every exercise's diagnosis shares: the failure a check raises, reading an answer, comparing it
with the reference (shape, then values: an observation of what differs), and the cause search that
names a catalogued mistake only where it reproduces the answer on every call of the test."""
from dataclasses import dataclass, field
from itertools import combinations
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


# --- the cause search: a switch is named only where it reproduces every call ----------------------------

@dataclass
class Call:
    """One call of a test as the search sees it: the case, what came back (a decoded answer, or the error),
    the cases called before it in the same process (what state kept between calls would hold), and the
    switches' results on it, computed once."""
    case: object
    got: object = None
    error: dict | None = None
    ran: bool = False
    before: tuple = ()
    memo: dict = field(default_factory=dict)

    @classmethod
    def of(cls, case, outcome, before: tuple = ()) -> "Call":
        if not isinstance(outcome, dict):
            return cls(case, before=before)
        if isinstance(outcome.get("error"), dict):
            return cls(case, error=outcome["error"], ran=True, before=before)
        if "result" in outcome:
            try:
                return cls(case, got=calling.decode(outcome["result"]), ran=True, before=before)
            except Exception:  # noqa: BLE001 - an unreadable answer is reproduced by nothing
                return cls(case, got=calling.Other("unreadable"), ran=True, before=before)
        return cls(case, before=before)


def reproduces(spec: Spec, call: Call, keys: frozenset, dtype: str = "") -> bool:
    """The reference with ``keys`` on gives this call's answer: the same values within the tolerance the
    grade uses (the answer's dtype's, or ``dtype``'s for a mistake of precision; shapes alone in a shape
    test), or the same failure (see :func:`errors.same_failure`)."""
    from .errors import same_failure
    if keys not in call.memo:
        try:
            call.memo[keys] = (True, spec.model(call.case, keys, call))
        except Exception as err:  # noqa: BLE001 - a failure is the switch's result too
            call.memo[keys] = (False, err)
    ok, value = call.memo[keys]
    if not ok:
        return call.error is not None and same_failure(call.error, value)
    if call.error is not None or not call.ran:
        return False
    try:
        return bool(spec.same(call.case, call.got, value, dtype or None))
    except Exception:  # noqa: BLE001 - an answer that cannot be compared is not reproduced
        return False


def search(spec: Spec, calls: list[Call], first: int) -> list[tuple]:
    """The catalogued mistakes that reproduce every call of the test that ran, the failing one
    (``first``) first: every single switch that does, else every pair; mistakes of exact arithmetic
    before mistakes of precision. [] when none does: then nothing is named."""
    ran = [calls[first]] + [c for i, c in enumerate(calls) if i != first and c.ran]
    switches = list(spec.switches(calls[first].case, calls[first].got))

    def fits(combo) -> bool:
        keys = frozenset(s.key for s in combo)
        dtype = next((s.dtype for s in combo if s.dtype), "")
        return spec.compatible(keys) and all(reproduces(spec, c, keys, dtype) for c in ran)
    exact = [s for s in switches if not s.dtype]
    loose = [s for s in switches if s.dtype]
    touch = _touches(spec, calls[first])
    tiers = ([(s,) for s in exact], [(a, b) for a, b in combinations(exact, 2) if touch(a, b)], [(s,) for s in loose],
             [(a, b) for a in loose for b in exact if touch(a, b)])
    for tier in tiers:
        found = [combo for combo in tier if fits(combo)]
        if found:
            return found
    return []


def _touches(spec: Spec, call: Call) -> Callable:
    """A pruning of the pairs, from the failing call alone: where a part of the answer (an array of a pair)
    is the right one, a pair that changes it is skipped; where it is not, a pair that leaves it is. (A
    pair whose two mistakes cancel on one part is missed: then nothing is named, never a wrong name.)"""
    try:
        right = _parts(spec.model(call.case, frozenset(), call))
        got = _parts(call.got)
        tol = max(arrays.tolerance(arrays.result_dtype(g)) for g in got)
        wrong = [not _close(g, r, tol) for g, r in zip(got, right)]
    except Exception:  # noqa: BLE001 - an error, or an answer of another form: every pair is tried
        return lambda a, b: True
    changes: dict = {}

    def changed(s) -> list[bool] | None:
        if s.key not in changes:
            try:
                changes[s.key] = [not _close(p, r, tol) for p, r in
                                  zip(_parts(spec.model(call.case, frozenset({s.key}), call)), right)]
            except Exception:  # noqa: BLE001 - a switch that raises here changes everything
                changes[s.key] = None
        return changes[s.key]

    def touch(a, b) -> bool:
        ca, cb = changed(a), changed(b)
        if ca is None or cb is None:
            return True
        return all((x or y) == w if w else not (x or y) for x, y, w in zip(ca, cb, wrong))
    return touch


def _parts(value) -> list:
    """The arrays of an answer (one, or the two of a pair; None where a pair holds None)."""
    items = list(value) if isinstance(value, tuple | list) else [value]
    return [None if v is None else arrays.as_array(v) for v in items]


def _close(a, b, tol) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return arrays.all_close(a, b, tol)


def named(switches, prefix: str = "") -> tuple[str, str]:
    """(label, sentence) for one or two mistakes; for a list of such combinations (each reproduces the
    answer: these calls cannot tell them apart), all of them as alternatives."""
    if isinstance(switches, list):
        labels = [" + ".join(s.label for s in c) for c in switches]
        switches = [c for i, c in enumerate(switches) if labels[i] not in labels[:i]]  # one wording said once
        if len(switches) == 1:
            return named(switches[0], prefix)
        options = [named(c) for c in switches]
        return " or ".join(label for label, _ in options), (
            f"{prefix}The numbers here fit {len(options)} known mistakes equally (each gives exactly your "
            "result on every call of this test): " + "; or ".join(f"{label} ({c[0].fix})" if len(c) == 1 else label
                                                                 for (label, _), c in zip(options, switches)) + ".")
    label = " + ".join(s.label for s in switches)
    if len(switches) == 1:
        s = switches[0]
        return label, f"{prefix}This is a known mistake, {s.label}: {s.fix}."
    a, b = switches
    return label, f"{prefix}Two mistakes at once: {a.label} ({a.fix}), and {b.label} ({b.fix})."


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
