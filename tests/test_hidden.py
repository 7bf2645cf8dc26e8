"""The hidden cases hold every property their cell exists to test, and every kind of input its prompt
allows, under EVERY secret: a thousand secrets are drawn (drawing only, no grading) and each property
and each kind of :data:`mha_checks.hidden.KINDS` is found, from the arguments alone, each time.
Per-submission draws rest on this: every student's draw is as strong as every other's."""
import numpy as np
import pytest
import torch

from mha_checks import calling, hidden, visible
from mha_checks.cases import AttnWeights, DecoderWeights, MhaWeights, causal_of
from mha_checks.diagnosis import SPECS
from mha_grader.trusted import secret

SECRETS = 1000
EX5 = {g for g, nb in hidden.GRADE_CELLS.items() if nb == "05_assembly"}
VIEWS = {"test_project_values", "test_project_bias", "test_fuse_heads", "test_split_heads_shape",
         "test_split_heads_values", "test_merge_heads_shape", "test_merge_heads_values",
         "test_output_projection_values", "test_output_projection_bias", "test_output_projection_per_head",
         "test_mha_cross"}
# how many calls open each cell with all-different sizes (the discriminating calls, before the domain's)
DISCRIMINATING = {"test_project_values": 4, "test_project_bias": 4, "test_fuse_heads": 3,
                  "test_split_heads_shape": 4, "test_split_heads_values": 3, "test_merge_heads_shape": 4,
                  "test_merge_heads_values": 4, "test_output_projection_values": 3, "test_output_projection_bias": 3,
                  "test_output_projection_per_head": 3, "test_mha_shapes": 3, "test_mha_weights": 3,
                  "test_mha_self_attention": 3, "test_mha_causal": 3, "test_mha_cross": 4,
                  "test_causal_attention_square": 3, "test_causal_attention_last": 3,
                  "test_decode_step_empty_cache": 3, "test_decode_step_cached": 3, "test_generate_one_layer": 2,
                  "test_generate": 2, "test_repeat_kv": 3, "test_gqa_shapes": 3, "test_gqa_values": 3,
                  "test_gqa_causal": 3}
DECODER = set(hidden.DECODER_CELLS)  # exercises 6 and 7: float32 and float64 both drawn in every cell
VIEWS |= {"test_causal_attention_square", "test_causal_attention_last", "test_decode_step_empty_cache",
          "test_decode_step_cached", "test_repeat_kv", "test_gqa_values", "test_gqa_causal"}
# the prompts' worked examples, typed here from the notebooks (solutions/mha/*.ipynb), not from hidden.py
WORKED = {"project": np.array([[[1.0, 2.0, 3.0]]]), "output_projection": np.array([[[1.0, 2.0, 3.0, 4.0]]]),
          "fuse_heads": np.array([[1.0, 2.0], [3.0, 4.0]]), "split_heads": np.arange(8.0).reshape(1, 2, 4),
          "merge_heads": np.arange(8.0).reshape(1, 2, 2, 2),
          "output_projection_per_head": np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]]),
          "multi_head_attention": np.arange(1.0, 13.0).reshape(1, 3, 4), "causal_attention": np.zeros((1, 1, 0, 2)),
          "repeat_kv": np.array([1.0, 2.0]).reshape(1, 2, 1, 1), "grouped_query_attention": np.zeros((1, 2, 2, 2))}
# (causal_attention's two examples: q = 0 of (1, 1, 3, 2) and (1, 1, 2, 2), read by is_worked_example)

def arrays_of(value) -> list[np.ndarray]:
    """Every array among a case's arguments (the module's weights included)."""
    if isinstance(value, list | tuple):
        return [a for v in value for a in arrays_of(v)]
    if isinstance(value, MhaWeights | AttnWeights):
        return list(value.weights.values())
    if isinstance(value, DecoderWeights):
        return [a for layer in value.layers for a in arrays_of(list(layer.values()))] + list(value.final.values())
    return [value] if isinstance(value, np.ndarray) else []


def is_view(a: np.ndarray) -> bool:
    """Travels as a transposed view (see calling.encode_array)."""
    return calling.transposition(a) is not None


def is_worked_example(case) -> bool:
    first = case.args[0][0] if isinstance(case.args[0], list) else case.args[0]
    if case.function not in WORKED:
        return False
    if case.function == "causal_attention":  # q = k = 0, v = arange: the prompt's two examples
        return case.expected is not None and not np.any(first) and np.shape(first) in ((1, 1, 3, 2), (1, 1, 2, 2))
    example = WORKED[case.function]
    return case.expected is not None and np.shape(first) == example.shape and np.array_equal(first, example)


def lengths(case) -> list[int]:
    """The lengths of one call: T (or T_q and T_k) that a cached result would depend on (1 may recur)."""
    s = SPECS[case.function].sizes(case)
    keys = ("T", "T_q", "T_k", "T_new", "T_cached", "T_p") + (("d",) if case.function == "fuse_heads" else ())
    return sorted({s[k] for k in keys if k in s} - {0, 1})


def _bias(case, index: int, name: str = "b") -> str:
    if len(case.args) <= index:
        return f"{name} omitted"
    return f"{name}=None" if case.args[index] is None else f"{name} given"


def kinds(case) -> set[str]:
    """The kinds of input (the names of :data:`hidden.KINDS`) one call holds, read from its arguments."""
    if is_worked_example(case):
        return {"worked example"}
    f, s = case.function, SPECS[case.function].sizes(case)
    found = {f"{k}=1" for k, v in s.items() if v == 1}
    found |= {"view"} if any(map(is_view, arrays_of(case.args))) else set()
    if f in ("project", "output_projection"):
        x, w = case.args[:2]
        found |= {"batched" if np.ndim(x) == 3 else "unbatched", _bias(case, 2),
                  "square" if w.shape[0] == w.shape[1] else "non-square"}
    elif f == "fuse_heads":
        h, d, d_k = s["h"], s["d"], s["d_k"]
        found |= {_bias(case, 1, "b_heads")} | ({"fused square"} if d == h * d_k else set()) | \
            ({"all different"} if len({h, d, d_k, h * d_k}) == 4 else set())
    elif f == "split_heads":
        b, t, h, d_k = s["B"], s["T"], s["h"], s["d_k"]
        found |= {"T divisible by h" if h > 1 and t > h and t % h == 0 else "T not divisible by h" if t % h else ""}
        found |= {"all different"} if len({b, t, h, d_k, h * d_k}) == 5 else set()
    elif f == "merge_heads":
        b, h, t, d_v = s["B"], s["h"], s["T"], s["d_v"]
        found |= {"all different"} if len({b, h, t, d_v, h * d_v}) == 5 else set()
        found |= {"merge undoes split"} if case.expected is not None else set()
    elif f == "output_projection_per_head":
        b, h, t, d_v, d_model = (s[k] for k in ("B", "h", "T", "d_v", "d_model"))
        found |= {_bias(case, 2)} | ({"square"} if h * d_v == d_model else set())
        found |= {"all different"} if len({b, h, t, d_v, d_model, h * d_v}) == 6 else set()
    elif f in DECODER_FUNCTIONS:
        found |= decoder_kinds(case, s)
    else:
        query, key, value = case.args[:3]
        found |= {"causal" if causal_of(case) else "not causal" if len(case.args) > 4 else "causal omitted"}
        if key is query and value is query:
            found |= {"self"} | ({"T=1"} if s["T_q"] == 1 else set())
        else:
            found |= {f"cross T_q{'>' if s['T_q'] > s['T_k'] else '<'}T_k"} if s["T_q"] != s["T_k"] else set()
            found |= {"key is value"} if key is value else set()
    return found - {""}


DECODER_FUNCTIONS = {"causal_attention", "decode_step", "generate", "repeat_kv", "grouped_query_attention"}


def decoder_kinds(case, s: dict) -> set[str]:
    """Exercises 6 and 7's kinds of input, read from the arguments."""
    found = {np.dtype(a.dtype).name for a in arrays_of(case.args)}
    f = case.function
    if f == "causal_attention":
        found |= {"T_q=T_k" if s["T_q"] == s["T_k"] else "T_q<T_k"} | ({"T=1"} if s["T_q"] == s["T_k"] == 1 else set())
    elif f == "decode_step":
        found |= {"empty cache"} if s["T_cached"] == 0 else set()
        found |= {"T_new>1"} if s["T_new"] > 1 else set()
    elif f == "generate":
        found |= {"one layer"} if s["layers"] == 1 else {"layers>1"}
    elif f in ("repeat_kv", "grouped_query_attention"):
        g, h = s["g"], s["h"]
        found |= {"g=1" if g == 1 else "g=h" if g == h else "1<g<h"}
    if f == "grouped_query_attention":
        found |= {"causal" if causal_of_gqa(case) else "not causal" if len(case.args) > 3 else "causal omitted"}
        found |= {"T_q=T_k" if s["T_q"] == s["T_k"] else "T_q<T_k" if s["T_q"] < s["T_k"] else "T_q>T_k"}
    return found


def causal_of_gqa(case) -> bool:
    return bool(case.args[3]) if len(case.args) > 3 else False


def problems(grade_id: str, cases: list) -> list[str]:
    found = []
    first = cases[:DISCRIMINATING[grade_id]]
    for case in first:
        sizes = SPECS[case.function].sizes(case)
        if case.function in ("multi_head_attention", "causal_attention", "grouped_query_attention") and \
                sizes["T_q"] == sizes["T_k"]:
            sizes.pop("T_k")
        if case.function == "decode_step":
            sizes.pop("d_model")  # h * d_k
            if sizes["T_cached"] == 0:
                sizes.pop("T_cached")  # an empty cache
        if case.function == "generate":
            sizes.pop("d_model")
            if sizes["layers"] == 1:
                sizes.pop("layers")
        if len(set(sizes.values())) != len(sizes) or min(sizes.values()) < 1:
            found.append(f"sizes not all different in a discriminating call: {sizes}")
    for case in cases:
        dtypes = {a.dtype for a in arrays_of(case.args)}
        if grade_id in DECODER:
            if len(dtypes) != 1 or not dtypes <= {np.dtype(np.float32), np.dtype(np.float64)}:
                found.append(f"dtypes {dtypes}")  # each call in one float dtype; both among the kinds
        elif dtypes != {np.dtype(np.float32 if grade_id in EX5 else np.float64)}:
            found.append(f"dtypes {dtypes}")
    seen = [t for case in cases if not is_worked_example(case) for t in lengths(case)]
    if len(seen) != len(set(seen)):
        found.append(f"a length used by two calls: {seen}")
    if grade_id in VIEWS and not any(is_view(a) for c in first for a in arrays_of(c.args)):
        found.append("no transposed (non-contiguous) argument in a discriminating call")
    missing = set(hidden.KINDS[grade_id]) - {k for case in cases for k in kinds(case)}
    if missing:
        found.append(f"kinds never drawn: {sorted(missing)}")
    if grade_id in EX5:
        calls = [(SPECS[c.function].sizes(c), causal_of(c)) for c in first]
        want = {"test_mha_cross": [(True, ">"), (True, "<"), (False, "<"), (False, ">")],
                "test_mha_shapes": [(False, ">"), (False, "<"), (False, "=")],
                "test_mha_weights": [(True, "="), (True, "="), (True, ">")], "test_mha_causal": [(True, "=")] * 3,
                "test_mha_self_attention": [(False, "=")] * 3}[grade_id]
        have = sorted((causal, "=" if s["T_q"] == s["T_k"] else ">" if s["T_q"] > s["T_k"] else "<")
                      for s, causal in calls)
        if have != sorted(want):
            found.append(f"calls (causal, T_q vs T_k) {have}, expected {sorted(want)}")
    return found


def test_every_property_and_kind_under_a_thousand_secrets():
    missed: dict = {}
    for n in range(SECRETS):
        key = f"secret number {n:04d} of the coverage test".encode()
        for grade_id, notebook in hidden.GRADE_CELLS.items():
            rng = secret.rng(key, "mha", notebook, grade_id, "student", "sha")
            for p in problems(grade_id, hidden.hidden_cases(grade_id, rng)):
                missed.setdefault(f"{grade_id}: {p.split(':')[0]}", (n, p))
    assert not missed, missed


def test_every_kind_is_listed_for_every_cell_and_its_prompt():
    """KINDS names a kind for every cell, each with the boundary sizes its prompt allows to be 1."""
    assert set(hidden.KINDS) == set(hidden.GRADE_CELLS) == set(DISCRIMINATING)
    ones = {"project": {"B=1", "T=1", "d_in=1", "d_out=1"}, "fuse_heads": {"h=1", "d_k=1", "d=1"},
            "split_heads": {"B=1", "T=1", "h=1", "d_k=1"}, "merge_heads": {"B=1", "h=1", "T=1", "d_v=1"},
            "output_projection": {"B=1", "T=1", "d_in=1", "d_out=1"},
            "output_projection_per_head": {"B=1", "h=1", "T=1", "d_v=1", "d_model=1"},
            "multi_head_attention": {"B=1", "h=1", "d_k=1", "T_q=1"}, "causal_attention": {"B=1", "h=1", "d_k=1"},
            "decode_step": {"B=1", "h=1", "d_k=1", "T_new=1"}, "generate": {"B=1", "h=1", "T_p=1", "steps=1"},
            "repeat_kv": {"B=1", "T=1", "d=1", "g=1"}, "grouped_query_attention": {"g=1", "T_q=1"}}
    for grade_id in hidden.GRADE_CELLS:
        function = hidden.hidden_cases(grade_id, np.random.default_rng(0))[0].function
        assert ones[function] <= set(hidden.KINDS[grade_id]), grade_id
        assert "worked example" in hidden.KINDS[grade_id] or grade_id in {
            "test_mha_shapes", "test_mha_self_attention", "test_mha_cross", "test_decode_step_empty_cache",
            "test_decode_step_cached", "test_generate_one_layer", "test_generate", "test_gqa_shapes",
            "test_gqa_values"}  # cells whose prompt shows none


def test_the_coverage_test_can_fail():
    """Each property and kind check catches a draw that lacks it."""
    cases = hidden.hidden_cases("test_mha_cross", np.random.default_rng(0))
    assert problems("test_mha_cross", cases) == []
    assert any("calls" in p for p in problems("test_mha_cross", cases[:1] + cases[1:2] * 3 + cases[4:]))
    assert any("never drawn" in p and "key is value" in p for p in problems("test_mha_cross", cases[:5]))
    passed = [c for c in cases if "causal omitted" not in kinds(c)]  # causal always passed: its default never used
    assert any("never drawn" in p and "'causal omitted'" in p for p in problems("test_mha_cross", passed))
    merge = hidden.hidden_cases("test_merge_heads_shape", np.random.default_rng(0))
    contiguous = [hidden.Case(c.function, c.names, (np.ascontiguousarray(c.args[0]),), c.check, c.expected)
                  for c in merge]
    assert any(p.startswith("no transposed") for p in problems("test_merge_heads_shape", contiguous))
    assert any("two calls" in p for p in problems("test_merge_heads_shape", merge[1:2] * 2 + merge[2:]))
    linear = hidden.hidden_cases("test_output_projection_values", np.random.default_rng(0))
    no_square = [c for c in linear if "square" not in kinds(c)]
    assert any("'square'" in p for p in problems("test_output_projection_values", no_square))
    omitted = [c for c in linear if "b omitted" not in kinds(c)]
    assert any("'b omitted'" in p for p in problems("test_output_projection_values", omitted))
    per_head = hidden.hidden_cases("test_output_projection_per_head", np.random.default_rng(0))
    assert any("'B=1'" in p for p in problems("test_output_projection_per_head",
                                               [c for c in per_head if "B=1" not in kinds(c)]))
    assert any("'worked example'" in p for p in problems("test_output_projection_per_head", per_head[:-1]))


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
