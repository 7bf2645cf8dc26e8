"""The trusted judge: one case and the plain-data outcome of calling the student's function on it
(see :mod:`mha_checks.calling`) become a :class:`Verdict`.

It never raises. It never runs student code. A failed verdict's message is the whole feedback
for that case, in plain words: what is wrong (shape axis by axis, or the first differing
element), where the computation departs from the reference and which mistake that is, and the
fix. Tolerance: :mod:`mha_checks.arrays` (one policy for every exercise).

Accepted as right, whatever the style: any float dtype within the tolerance, NumPy arrays or
torch tensors in any exercise (torch inside the NumPy exercises, NumPy inside exercise 5: the
values are graded), a list or a tuple where a pair is asked, views and non-contiguous results.
"""
from dataclasses import dataclass

from . import calling
from .cases import Case
from .diagnosis import SPECS, Fail, error_fail


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str
    mistake: str | None = None


PASSED = Verdict(True, "", None)


def judge(case: Case, outcome) -> Verdict:
    """The verdict on one case (never raises)."""
    name = getattr(case, "function", "the function")
    try:
        _judge(case, outcome)
        return PASSED
    except Fail as fail:
        return Verdict(False, fail.message, f"{name}: {fail.mistake}")
    except Exception as err:  # noqa: BLE001 - an odd outcome must still become a verdict
        return Verdict(False, f"{name}: the answer could not be checked ({type(err).__name__}: "
                              f"{str(err)[:200]}). Return plain arrays or tensors of the shape asked.",
                       f"{name}: unreadable answer")


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


__all__ = ["Verdict", "judge", "Case", "Fail"]
