"""The hidden cases hold every property their cell exists to test under EVERY secret: a thousand
secrets are drawn (drawing only, no grading) and each property is asserted each time. Per-submission
draws rest on this: every student's draw is as strong as every other's."""
import numpy as np
import pytest
import torch

from mha_checks import calling, hidden, visible
from mha_checks.cases import MhaWeights
from mha_checks.diagnosis import SPECS
from mha_grader import secret

SECRETS = 1000
EX5 = {g for g, nb in hidden.GRADE_CELLS.items() if nb == "05_assembly"}
VIEWS = {"test_project_values", "test_project_bias", "test_fuse_heads", "test_split_heads_shape",
         "test_split_heads_values", "test_merge_heads_shape", "test_merge_heads_values",
         "test_output_projection_values", "test_output_projection_bias", "test_output_projection_per_head",
         "test_mha_cross"}


def arrays_of(value) -> list[np.ndarray]:
    """Every array among a case's arguments (the module's weights included)."""
    if isinstance(value, list | tuple):
        return [a for v in value for a in arrays_of(v)]
    if isinstance(value, MhaWeights):
        return list(value.weights.values())
    return [value] if isinstance(value, np.ndarray) else []


def is_view(a: np.ndarray) -> bool:
    """Travels as a transposed view (see calling.encode_array)."""
    return calling.transposition(a) is not None


def lengths(case) -> list[int]:
    """The lengths of one call: T (or T_q and T_k) that a cached result would depend on."""
    s = SPECS[case.function].sizes(case)
    return sorted({s[k] for k in ("T", "T_q", "T_k", "d") if k in s})


def problems(grade_id: str, cases: list) -> list[str]:
    found = []
    for case in cases:
        sizes = SPECS[case.function].sizes(case)
        if case.function == "multi_head_attention" and sizes["T_q"] == sizes["T_k"]:
            sizes.pop("T_k")
        if len(set(sizes.values())) != len(sizes):
            found.append(f"sizes not all different: {sizes}")
        dtypes = {a.dtype for a in arrays_of(case.args)}
        if dtypes != {np.dtype(np.float32 if grade_id in EX5 else np.float64)}:
            found.append(f"dtypes {dtypes}")
    seen = [t for case in cases for t in lengths(case)]
    if len(seen) != len(set(seen)):
        found.append(f"a length used by two calls: {seen}")
    if grade_id in VIEWS and not any(is_view(a) for c in cases for a in arrays_of(c.args)):
        found.append("no transposed (non-contiguous) argument")
    if grade_id in EX5:
        calls = [(SPECS[c.function].sizes(c), bool(c.args[4])) for c in cases]
        want = {"test_mha_cross": [(True, ">"), (True, "<"), (False, "<"), (False, ">")],
                "test_mha_shapes": [(False, ">"), (False, "<")],
                "test_mha_weights": [(True, "="), (True, "=")], "test_mha_causal": [(True, "=")] * 3,
                "test_mha_self_attention": [(False, "=")] * 3}[grade_id]
        have = sorted((causal, "=" if s["T_q"] == s["T_k"] else ">" if s["T_q"] > s["T_k"] else "<")
                      for s, causal in calls)
        if have != sorted(want):
            found.append(f"calls (causal, T_q vs T_k) {have}, expected {sorted(want)}")
    return found


def test_every_property_under_a_thousand_secrets():
    missed: dict = {}
    for n in range(SECRETS):
        key = f"secret number {n:04d} of the coverage test".encode()
        for grade_id, notebook in hidden.GRADE_CELLS.items():
            rng = secret.rng(key, "mha", notebook, grade_id, "student", "sha")
            for p in problems(grade_id, hidden.hidden_cases(grade_id, rng)):
                missed.setdefault(f"{grade_id}: {p.split(':')[0]}", n)
    assert not missed, missed


def test_the_coverage_test_can_fail():
    """Each property check catches a draw that lacks it."""
    cases = hidden.hidden_cases("test_mha_cross", np.random.default_rng(0))
    assert problems("test_mha_cross", cases) == []
    assert any("calls" in p for p in problems("test_mha_cross", cases[:1] + cases[1:2] * 3))
    merge = hidden.hidden_cases("test_merge_heads_shape", np.random.default_rng(0))
    contiguous = [hidden.Case(c.function, c.names, (np.ascontiguousarray(c.args[0]),), c.check) for c in merge]
    assert "no transposed (non-contiguous) argument" in problems("test_merge_heads_shape", contiguous)
    assert any("two calls" in p for p in problems("test_merge_heads_shape", merge[1:2] * 2))


@pytest.mark.parametrize("grade_id", sorted(VIEWS))
def test_a_view_reaches_the_students_function_as_a_view(grade_id):
    seen = []
    for case in hidden.hidden_cases(grade_id, np.random.default_rng(1)):
        for arg in calling.call(lambda *a: [_contiguous(x) for x in a], list(case.names), case.specs())["result"]:
            seen.append(arg)
    assert False in [s for s in seen if isinstance(s, bool)] or any(False in s for s in seen if isinstance(s, list))


def _contiguous(x):
    if isinstance(x, list | tuple):  # (a list argument arrives as calling.ArgumentList, a tuple)
        return [_contiguous(v) for v in x]
    if isinstance(x, torch.Tensor):
        return x.is_contiguous()
    return bool(x.flags.c_contiguous) if isinstance(x, np.ndarray) else None


def test_a_view_keeps_its_values_both_ways():
    x = np.arange(24.0).reshape(2, 3, 4).transpose(0, 2, 1)
    spec = calling.encode_array(x, keep_layout=True)
    y = calling.build_argument(spec)
    assert not y.flags.c_contiguous and y.flags.writeable and np.array_equal(x, y)
    assert np.array_equal(calling.decode_array(spec["$array"]), x)
    assert "order" not in calling.encode_array(x)["$array"]  # results travel as plain values
    with pytest.raises(ValueError, match="order"):
        calling.decode_array({**spec["$array"], "order": [0, 0, 1]})


def test_draws_differ_per_submission_and_repeat_for_the_same_one():
    def draw(student, digest):
        rng = secret.rng(b"k" * 40, "mha", "05_assembly", "test_mha_cross", student, digest)
        return [np.asarray(c.args[0]) for c in hidden.hidden_cases("test_mha_cross", rng)]
    a, again, other, resubmitted = draw("ann", "d1"), draw("ann", "d1"), draw("bob", "d1"), draw("ann", "d2")
    assert all(np.array_equal(x, y) for x, y in zip(a, again))
    for b in (other, resubmitted):
        assert not any(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


def test_the_visible_check_hands_a_view_over_as_a_view():
    """exercise 3's visible test passes split_heads's transposed view: the student's function receives one."""
    seen = []

    def merge_heads(x):
        seen.append(x.strides)
        b, h, t, d_v = x.shape
        return x.transpose(0, 2, 1, 3).reshape(b, t, h * d_v)
    x = np.arange(120.0).reshape(2, 5, 12)
    exec("check('merge_heads', x.reshape(2, 5, 3, 4).transpose(0, 2, 1, 3), expected=x)",
         {"check": visible.check, "merge_heads": merge_heads, "x": x})
    view = x.reshape(2, 5, 3, 4).transpose(0, 2, 1, 3)
    assert seen == [view.strides] and not view.flags.c_contiguous
