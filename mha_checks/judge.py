"""PLACEHOLDER until the checks branch lands: compare with the reference, no diagnosis."""
from dataclasses import dataclass

import numpy as np

from mha_lib import reference

from . import calling


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str = ""
    mistake: str | None = None


def _want(case):
    a = case.args
    f = case.function
    if f == "project":
        return reference.project(a[0], a[1], a[2])
    if f == "split_heads":
        return reference.split_heads(a[0], a[1])
    if f == "merge_heads":
        return reference.merge_heads(a[0])
    if f == "output_projection":
        return reference.output_projection(a[0], a[1], a[2])
    if f == "output_projection_per_head":
        return reference.output_projection(reference.merge_heads(a[0]), a[1], a[2])
    if f == "fuse_heads":
        return np.concatenate(a[0], axis=1), None if a[1] is None else np.concatenate(a[1])
    raise KeyError(f)


def judge(case, outcome: dict) -> Verdict:
    if outcome.get("ready_made"):
        return Verdict(False, "ready-made", "ready-made")
    if "error" in outcome:
        return Verdict(False, f"{case.function} raised {outcome['error']['type']}", "raises")
    if outcome.get("mutated"):
        return Verdict(False, "changed input", "mutated")
    got = calling.decode(outcome.get("result"))
    want = _want(case)
    if isinstance(want, tuple):
        ok = isinstance(got, tuple | list) and len(got) == 2 and np.shape(got[0]) == want[0].shape and \
            np.allclose(got[0], want[0]) and ((want[1] is None and got[1] is None) or
                                              (got[1] is not None and np.allclose(got[1], want[1])))
    else:
        try:
            ok = np.shape(got) == want.shape and (case.check == "shape" or np.allclose(np.asarray(got, float), want))
        except (TypeError, ValueError):
            ok = False
    return Verdict(True) if ok else Verdict(False, f"{case.function}: wrong", f"{case.function}: wrong")
