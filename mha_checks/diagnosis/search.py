"""The cause search: a catalogued switch (or pair) of :mod:`mha_checks.variants` / :mod:`mha_checks.attention`
is named only where its reference reproduces the answer on every call of the test that ran (its values
within the grade's tolerance, its shape, or its failure: :func:`errors.same_failure`); :func:`named` words
what was found."""
from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable

from .. import arrays, calling
from .common import Spec
from .errors import same_failure


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


def modelled(spec: Spec, call: Call, keys: frozenset) -> tuple[bool, object]:
    """(True, the reference's result with ``keys`` on) or (False, the error it raised), on this call: computed
    once per call and keys, for the search and its pruning alike."""
    if keys not in call.memo:
        try:
            call.memo[keys] = (True, spec.model(call.case, keys, call))
        except Exception as err:  # noqa: BLE001 - a failure is the switch's result too
            call.memo[keys] = (False, err)
    return call.memo[keys]


def reproduces(spec: Spec, call: Call, keys: frozenset, dtype: str = "") -> bool:
    """The reference with ``keys`` on gives this call's answer: the same values within the tolerance the
    grade uses (the answer's dtype's, or ``dtype``'s for a mistake of precision; shapes alone in a shape
    test), or the same failure (see :func:`errors.same_failure`)."""
    ok, value = modelled(spec, call, keys)
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
    for tier in _tiers(spec, calls[first], switches):
        found = [combo for combo in tier if fits(combo)]
        if found:
            return found
    return []


def _tiers(spec: Spec, failing: Call, switches: list):
    """The combinations to try, tier by tier: each made only when the tiers before it named nothing (a
    single switch that reproduces the answer, the usual case, costs no pair's pruning)."""
    exact = [s for s in switches if not s.dtype]
    loose = [s for s in switches if s.dtype]
    yield [(s,) for s in exact]
    touch = _touches(spec, failing)
    yield [(a, b) for a, b in combinations(exact, 2) if touch(a, b)]
    yield [(s,) for s in loose]
    yield [(a, b) for a in loose for b in exact if touch(a, b)]


def _touches(spec: Spec, call: Call) -> Callable:
    """A pruning of the pairs, from the failing call alone: where a part of the answer (an array of a pair)
    is the right one, a pair that changes it is skipped; where it is not, a pair that leaves it is. (A
    pair whose two mistakes cancel on one part is missed: then nothing is named, never a wrong name.)"""
    ok, value = modelled(spec, call, frozenset())
    if not ok:  # the reference itself fails on this call: every pair is tried
        return lambda a, b: True
    try:
        right = _parts(value)
        got = _parts(call.got)
        tol = max(arrays.tolerance(arrays.result_dtype(g)) for g in got)
        wrong = [not _close(g, r, tol) for g, r in zip(got, right)]
    except Exception:  # noqa: BLE001 - an error, or an answer of another form: every pair is tried
        return lambda a, b: True
    changes: dict = {}

    def changed(s) -> list[bool] | None:
        if s.key not in changes:
            ok, value = modelled(spec, call, frozenset({s.key}))  # (the single switches' tier computed it)
            try:
                changes[s.key] = [not _close(p, r, tol) for p, r in zip(_parts(value), right)] if ok else None
            except Exception:  # noqa: BLE001 - a switch whose result cannot be compared changes everything
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
