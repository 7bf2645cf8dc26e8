"""The trusted judge: the cases of one test and the plain-data outcomes of calling the student's function
on them (see :mod:`mha_checks.calling`) become one :class:`Verdict`.

It never raises. It never runs student code. The first failing call decides the verdict; its message
is the whole feedback for the test, in plain words: what differs (the shape axis by axis, the first
differing element, the error raised) and, when one is found, the mistake behind it and the fix. A
mistake is named only when a catalogued switch (or pair) reproduces the student's answer on every call
of the test that ran (:func:`mha_checks.diagnosis.search.search`); otherwise the message says what was
observed and no more. Tolerance: :mod:`mha_checks.arrays` (one policy for every exercise).

Accepted as right, whatever the style: any float dtype within the tolerance, NumPy arrays or
torch tensors in any exercise (torch inside the NumPy exercises, NumPy inside exercise 5: the
values are graded), a list or a tuple where a pair is asked, views and non-contiguous results.
"""
from dataclasses import dataclass

from . import calling
from .cases import Case
from .diagnosis import SPECS, Call, Fail, error_fail, named, search


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str
    mistake: str | None = None
    causes: tuple = ()  # the switches named (each a frozenset of keys): every one reproduces every call


PASSED = Verdict(True, "", None)


def judge(case: Case, outcome) -> Verdict:
    """The verdict on one call (a test of one call: never raises)."""
    return judge_test([case], [outcome])


def judge_test(cases: list[Case], outcomes: list, before: tuple = ()) -> Verdict:
    """The verdict on a test: its cases and their outcomes (None for a call that did not run), in order;
    ``before``: the cases called earlier in the same process (the notebook's earlier tests)."""
    name = getattr(cases[0], "function", "the function") if cases else "the function"
    for i, (case, outcome) in enumerate(zip(cases, outcomes)):
        try:
            _judge(case, outcome)
        except Fail as fail:
            return Verdict(False, *_named(fail, cases, outcomes, i, name, before))
        except Exception as err:  # noqa: BLE001 - an odd outcome must still become a verdict
            return Verdict(False, f"{name}: the answer could not be checked ({type(err).__name__}: "
                                  f"{str(err)[:200]}). Return plain arrays or tensors of the shape asked.",
                           f"{name}: unreadable answer")
    return PASSED


def _named(fail: Fail, cases: list, outcomes: list, first: int, name: str, before: tuple) -> tuple[str, str, tuple]:
    """(message, label, causes): the observation, with the mistakes that reproduce every call in place of its
    hints."""
    if fail.searchable:
        try:
            calls = [Call.of(c, o, (*before, *cases[:i])) for i, (c, o) in enumerate(zip(cases, outcomes))]
            found = search(SPECS[cases[first].function], calls, first)
        except Exception:  # noqa: BLE001 - a search that fails names nothing; the observation stands
            found = []
        if found:
            label, text = named(found)
            return f"{fail.head} {text}", f"{name}: {label}", tuple(frozenset(s.key for s in c) for c in found)
    return fail.message, f"{name}: {fail.mistake}", ()


def _judge(case: Case, outcome) -> None:
    spec = SPECS[case.function]
    call = spec.describe(case)
    if not isinstance(outcome, dict):
        raise Fail(f"{call}: no answer came back.", "no answer")
    mutated = outcome.get("mutated") or []
    error = outcome.get("error")
    if isinstance(error, dict) and error.get("type") == calling.ArgumentChanged.__name__:
        mutated, error = [_argument_of(error)], None  # it tried to change an argument handed over unchangeable
    if error is not None:
        error_fail(call, case, error if isinstance(error, dict) else {"message": str(error)}, _sizes(spec, case))
    if mutated:
        names = [str(n) for n in mutated][:4]
        what = " and ".join(f"`{n}`" for n in names)
        params = "mha" in names
        lists = [n for n in names if isinstance(dict(zip(case.names, case.args)).get(n), list)]
        whose = "its parameters" if params else "the caller’s list" if lists else "the caller’s array"
        raise Fail(f"{call} changes {what} in place ({whose}): "
                   "a function must leave its arguments as it found them. Compute into new "
                   f"{'tensors' if params else 'arrays'} (y = x + b, not x += b; no x[...] = ..., "
                   "no .add_(), no copy_ into a weight"
                   + (f"; copy a list before changing it: list({lists[0]})" if lists else "") + ").",
                   "changes its arguments in place" if not params else "changes mha's parameters in place")
    if "result" not in outcome:
        raise Fail(f"{call}: no answer came back.", "no answer")
    try:
        result = calling.decode(outcome["result"])
    except Exception:  # noqa: BLE001
        raise Fail(f"{call} returned a value that could not be read; return arrays or tensors.",
                   "unreadable answer") from None
    spec.check(case, result, call)


def _argument_of(error: dict) -> str:
    """The argument an ArgumentChanged names (its message opens with it in backquotes)."""
    message = str(error.get("message", ""))
    return message.split("`")[1][:40] if message.count("`") >= 2 else "an argument"


def _sizes(spec, case) -> dict:
    try:
        return spec.sizes(case)
    except Exception:  # noqa: BLE001 - a case whose sizes cannot be read names none
        return {}


__all__ = ["Verdict", "judge", "judge_test", "Case", "Fail"]
