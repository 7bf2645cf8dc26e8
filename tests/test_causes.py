"""Every sentence that names a cause, the switch behind it, and no such sentence without it (issue 27).

A sentence names a cause only through :func:`mha_checks.diagnosis.search.search`: a catalogued switch
(or a pair) whose reference reproduces the answer on every call of the test. Here:

* every switch of every function's catalogue (and an instance of each fitted one: an arrangement, a
  scale, a dropout) plays a student with exactly that mistake on every grade cell of its function: where
  the mistake shows, the verdict names it (its sentence is in the message), and every cause the verdict
  names reproduces every call; ``SENTENCES`` prints the enumeration (``pytest -s``);
* wrong answers no switch explains (noise, rounding, a mistake on one call only, a mistake and noise)
  are judged: whatever is named reproduces every call, and a verdict names a cause exactly when it says
  "known mistake" (no other wording names one).
"""
import zlib

import numpy as np
import pytest

from mha_checks import arrange, attention, calling, hidden, variants
from mha_checks.diagnosis import SPECS
from mha_checks.diagnosis.search import Call, reproduces
from mha_checks.judge import judge_test

RNG_SEED = 27
CELLS = {}
for _grade, _nb in hidden.GRADE_CELLS.items():
    CELLS.setdefault(hidden.hidden_cases(_grade, np.random.default_rng(0))[0].function, []).append(_grade)

TORCH_WORDS = {  # a switch's own failure, as torch words it (what a student's torch code would raise)
    "reshape": lambda s: ("RuntimeError", f"shape '[{', '.join(map(str, s[2]))}]' is invalid for input of size {s[1]}"),
    "view of a transposed tensor": lambda s: ("RuntimeError", "view size is not compatible with input tensor's size "
                                              "and stride (at least one dimension spans across two contiguous "
                                              "subspaces). Use .reshape(...) instead."),
    "nothing to join": lambda s: ("ValueError", "torch.cat(): expected a non-empty list of Tensors"),
    "assert": lambda s: ("AssertionError", s[1]),
    "rank": lambda s: ("ValueError", f"not enough values to unpack (expected {s[1]}, got {s[2]})"),
    "broadcast": lambda s: ("RuntimeError", "The size of tensor a ({}) must match the size of tensor b ({}) at "
                            "non-singleton dimension {}".format(*s[1:])),
    "contract": lambda s: ("RuntimeError", f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[6, {s[1]}] but got: [6, {s[2]}]."),  # a batched product (q @ k^T, weights @ v)
    "join": lambda s: ("RuntimeError", "Sizes of tensors must match except in dimension {}. Expected size {} but got "
                       "size {} for tensor number 1 in the list.".format(s[1], *sorted(s[2]))),
}


def outcome(function: str, case, keys, got=None, rounding=None, before=()) -> dict:
    """What a student whose code makes exactly the mistakes ``keys`` gets back from this call (``before``:
    the cases it was called on earlier)."""
    try:
        value = SPECS[function].model(case, frozenset(keys), Call(case, got=got, before=tuple(before)))
    except variants.Failure as err:
        kind, message = TORCH_WORDS[err.signature[0]](err.signature)
        return {"error": {"type": kind, "message": message, "line": 3}, "mutated": []}
    except Exception as err:  # noqa: BLE001 - NumPy's own failure, as NumPy words it
        return {"error": {"type": type(err).__name__, "message": str(err), "line": 3}, "mutated": []}
    return {"result": calling.encode(_round(value, rounding) if rounding else value), "mutated": []}


def _round(value, dtype):
    if isinstance(value, tuple | list):
        return type(value)(_round(v, dtype) for v in value)
    return None if value is None else np.asarray(value).astype(dtype).astype(np.float64)


ARRANGED = {  # an instance of each arrangement story, and one told by its code alone
    "split_heads": [(("B", "h", "T", "d_k"), (0, 1, 2, 3), False, variants.SPLIT_NAMES["plain"]),
                    (("B", "T", "d_k", "h"), (0, 3, 1, 2), False, variants.SPLIT_NAMES[(("B", "T", "d_k", "h"),
                                                                                         (0, 3, 1, 2))]),
                    (("B", "T", "h", "d_k"), (0, 2, 3, 1), True, variants.SPLIT_NAMES[(("B", "T", "h", "d_k"),
                                                                                        (0, 2, 3, 1))]),
                    (("T", "B", "h", "d_k"), (0, 2, 1, 3), True, variants.B_T_MIXED),
                    (("B", "T", "h", "d_k"), (2, 0, 1, 3), True, None)],
    "merge_heads": [(("B", "h", "T", "d_v"), (0, 1, 2, 3), False, variants.MERGE_PLAIN),
                    (("B", "h", "T", "d_v"), (0, 2, 3, 1), False, variants.MERGE_NAMES[(("B", "h", "T", "d_v"),
                                                                                         (0, 2, 3, 1))]),
                    (("B", "h", "T", "d_v"), (2, 0, 1, 3), False, variants.MERGE_B_T)],
}


def fitted(function: str) -> list[tuple]:
    """(switch, how its student answers) for an instance of each fitted switch of ``function``."""
    if function == "multi_head_attention":
        return [(attention.scaled_by(1.7), {}), (attention.dropped(0.25), {"dropout": 0.25})]
    if function in ("project", "output_projection"):
        return [(variants.scaled_by(0.5, "w"), {})]
    return [(variants.arrangement_switch(arrange.Arrangement(order, perm), own, story, "the fix"), {})
            for order, perm, own, story in ARRANGED.get(function, [])]


def student(function: str, grade: str, keys: frozenset, dropout: float | None = None) -> tuple[list, list]:
    """The grade cell's cases and the outcomes of a student with the mistakes ``keys`` (a dropout draws its
    own zeros on each call, as F.dropout does; state kept between calls holds the cell's earlier calls)."""
    cases = hidden.hidden_cases(grade, np.random.default_rng(RNG_SEED))
    outcomes = []
    rng = np.random.default_rng(1)
    for i, case in enumerate(cases):
        got = None
        if dropout is not None:  # a random mask of kept weights, for the model to drop the rest
            right = SPECS[function].model(case, frozenset(), None)
            got = (right[0], np.where(rng.random(right[1].shape) < dropout, 0.0, 1.0))
        outcomes.append(outcome(function, case, keys, got, np.float16 if "half" in keys else None, cases[:i]))
    return cases, outcomes


def is_it(keys: frozenset, switch) -> bool:
    """``keys`` are this switch alone (a fitted one: its parameter refitted to the same value)."""
    if len(keys) != 1:
        return False
    key, = keys
    if isinstance(switch.key, tuple) and isinstance(key, tuple) and isinstance(switch.key[-1], float):
        return key[:-1] == switch.key[:-1] and np.isclose(key[-1], switch.key[-1], rtol=1e-6)
    return key == switch.key


def every_cause_reproduces(function: str, cases, outcomes, verdict) -> None:
    calls = [Call.of(c, o, tuple(cases[:i])) for i, (c, o) in enumerate(zip(cases, outcomes))]
    switches = {s.key: s for c in calls for s in SPECS[function].switches(c.case, c.got)}
    for keys in verdict.causes:
        dtype = next((switches[k].dtype for k in keys if k in switches and switches[k].dtype), "")
        assert all(reproduces(SPECS[function], c, keys, dtype) for c in calls if c.ran), (keys, verdict.message)
    says = any(w in verdict.message for w in ("This is a known mistake", "Two mistakes at once", "known mistakes"))
    assert says == bool(verdict.causes), verdict.message


def catalogue(function: str) -> list:
    case = hidden.hidden_cases(CELLS[function][0], np.random.default_rng(0))[0]
    static = [s for s in SPECS[function].switches(case, None)]
    return [(s, {}) for s in static] + fitted(function)


SWITCHES = [(f, s, how) for f in CELLS for s, how in catalogue(f)]
# torch's 16-bit kernels round differently from NumPy's: where a function's 16-bit computation is held to a
# 16-bit tolerance (exercises 5-7's attention) rather than reproduced exactly (exercises 1-4), noise of float16's
# size is that computation too, and may be named as it
HELD_TO_16_BITS = {f for f, s, _ in SWITCHES if s.dtype}
SENTENCES: dict = {}  # (function, switch key) -> (sentence, the cells where it shows)


@pytest.mark.parametrize("function, switch, how", SWITCHES, ids=lambda v: v if isinstance(v, str) else
                         str(getattr(v, "key", "")))
def test_each_switch_is_named_where_it_shows_and_only_with_what_reproduces(function, switch, how):
    shown = []
    for grade in CELLS[function]:
        cases, outcomes = student(function, grade, frozenset({switch.key}), how.get("dropout"))
        verdict = judge_test(cases, outcomes)
        if verdict.passed:
            continue  # this cell's calls cannot show this mistake
        every_cause_reproduces(function, cases, outcomes, verdict)
        arranged = isinstance(switch.key, tuple) and switch.key[0] == "arranged"  # found again, in simplest terms
        assert any(is_it(keys, switch) for keys in verdict.causes) or switch.dtype and verdict.causes or \
            arranged and verdict.causes and switch.label in verdict.mistake, (grade, verdict.mistake, verdict.message)
        assert switch.label.split(" by ")[0] in verdict.message, verdict.message

        shown.append(grade)
    SENTENCES[function, switch.key] = (switch.label, shown)
    assert shown, f"{function}: {switch.key} never shows in its cells' draws"


def test_the_sentences_enumerated():
    """Prints every sentence that names a cause, with its switch and the cells that show it (pytest -s)."""
    for function, switch, how in SWITCHES:
        if (function, switch.key) not in SENTENCES:
            test_each_switch_is_named_where_it_shows_and_only_with_what_reproduces(function, switch, how)
    width = max(len(label) for label, _ in SENTENCES.values())
    for (function, key), (label, shown) in sorted(SENTENCES.items(), key=lambda kv: kv[0][0]):
        print(f"{function:28s} {label:{width}s} <- {key!r:44.44s} {', '.join(shown)}")
    assert set(SENTENCES) == {(f, s.key) for f, s, _ in SWITCHES}


def corrupted(function: str, grade: str, kind: str, rng) -> tuple[list, list]:
    """A wrong answer no switch explains on every call."""
    cases = hidden.hidden_cases(grade, np.random.default_rng(RNG_SEED))
    switches = [s for s, _ in catalogue(function) if not s.dtype and not isinstance(s.key, tuple)]
    outcomes = []
    one = int(rng.integers(len(cases)))
    a, b = rng.choice(len(switches), size=2, replace=False)
    for i, case in enumerate(cases):
        if kind in ("noise", "loud noise"):  # right but for noise: float16's size, or far above it
            o = outcome(function, case, ())
            o = {"result": calling.encode(_noisy(calling.decode(o["result"]), rng, 1e-3 if kind == "noise" else 0.1)),
                 "mutated": []}
        elif kind == "rounded":  # right to float16's precision, returned as float64
            o = outcome(function, case, ("half",), rounding=np.float16)
        elif kind == "one call":  # a mistake on one call only (state kept between calls, ...)
            o = outcome(function, case, {switches[a].key} if i == one else (), before=cases[:i])
        else:                     # two mistakes, on every call, and noise
            o = outcome(function, case, {switches[a].key, switches[b].key}, before=cases[:i])
            if "result" in o:
                o = {"result": calling.encode(_noisy(calling.decode(o["result"]), rng, 1e-4)), "mutated": []}
        outcomes.append(o)
    return cases, outcomes


def _noisy(value, rng, scale):
    if isinstance(value, tuple | list):
        return type(value)(_noisy(v, rng, scale) for v in value)
    if value is None:
        return None
    a = np.asarray(value, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return a + scale * (1 + np.abs(a)) * rng.standard_normal(a.shape)


@pytest.mark.parametrize("grade", sorted(hidden.GRADE_CELLS))
@pytest.mark.parametrize("kind", ["noise", "loud noise", "rounded", "one call", "two and noise"])
def test_no_cause_is_named_that_does_not_reproduce_every_call(grade, kind):
    function = hidden.hidden_cases(grade, np.random.default_rng(0))[0].function
    rng = np.random.default_rng(zlib.crc32(f"{grade} {kind}".encode()))
    for _ in range(3):
        cases, outcomes = corrupted(function, grade, kind, rng)
        verdict = judge_test(cases, outcomes)
        every_cause_reproduces(function, cases, outcomes, verdict)
        if kind == "loud noise" or kind == "noise" and function not in HELD_TO_16_BITS:
            assert verdict.causes == () or verdict.passed, verdict.message
        if kind == "rounded" or kind == "noise":  # a torch function holds a 16-bit computation to float16's
            # tolerance, where noise of that size is rounding too; never a scale, never a mask
            assert all(k in ({"half"}, {"half_product"}) for k in verdict.causes), verdict.message


# --- issue 36: a cause is named only when it reproduces the answer, the error's words included --------------

def _torch_student(mask) -> object:
    """Exercise 5 in torch, right but for the causal mask ``mask(T_q, T_k)`` (True where a key is hidden)."""
    import math

    import torch
    import torch.nn.functional as F

    def multi_head_attention(query, key, value, mha, causal=False):
        h = mha.num_heads
        q, k, v = (F.linear(x, w, b).unflatten(-1, (h, -1)).transpose(1, 2) for x, w, b in
                   zip((query, key, value), mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)))
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(mask(query.shape[1], key.shape[1]), float("-inf"))
        a = s.softmax(-1)
        return mha.out_proj((a @ v).transpose(1, 2).flatten(2)), a
    return multi_head_attention


def _verdicts(function) -> dict:
    out, before = {}, []
    for grade in ("test_mha_weights", "test_mha_causal", "test_mha_cross", "test_mha_shapes"):
        cases = hidden.hidden_cases(grade, np.random.default_rng(RNG_SEED))
        outcomes = [calling.call(function, list(c.names), c.specs()) for c in cases]
        verdict = judge_test(cases, outcomes, tuple(before))
        every_cause_reproduces("multi_head_attention", cases, outcomes, verdict)
        out[grade] = verdict
        before += cases
    return out


def test_a_mask_built_t_k_by_t_q_is_named_only_by_causes_whose_error_words_it_gives():
    """Issue 36: a mask built (T_k, T_q) raises torch's broadcast error with tensor a (the mask's T_q) and
    tensor b (the scores' T_k); keys computed from the query give the same sizes the other way round, which
    a signature of the sizes alone (a set) could not tell apart: the cause named is the true one, or a tie that
    includes it (a mask built T_q x T_q fails with the very same words on every call drawn), never a cause
    matched only by the raise."""
    import torch
    verdicts = _verdicts(_torch_student(lambda t_q, t_k: torch.ones(t_k, t_q, dtype=torch.bool).triu(1)))
    named = [v for v in verdicts.values() if v.causes]
    assert named, {g: v.message for g, v in verdicts.items()}
    for verdict in named:
        keys = {k for combo in verdict.causes for k in combo}
        assert "mask_transposed" in keys and "kv_from_query" not in keys, verdict.message


@pytest.mark.parametrize("error, named", [
    ({"type": "AssertionError", "message": "T_q must equal T_k for my mask"}, False),  # the student's own words
    ({"type": "AssertionError", "message": ""}, True),
    ({"type": "RuntimeError", "message": "The size of tensor a (3) must match the size of tensor b (4) at "
                                         "non-singleton dimension 3"}, True),
    ({"type": "RuntimeError", "message": "The size of tensor a (4) must match the size of tensor b (3) at "
                                         "non-singleton dimension 3"}, False),  # the sizes the other way round
    ({"type": "TypeError", "message": "unsupported operand type(s) for +: 'Tensor' and 'NoneType'"}, True),
    ({"type": "TypeError", "message": "'NoneType' object has no attribute 'shape'"}, False),
    ({"type": "ValueError", "message": "not enough values to unpack (expected 3, got 2)"}, True),
    ({"type": "ValueError", "message": "too many values to unpack (expected 2)"}, False),  # a ValueError alone
])
def test_an_error_is_reproduced_by_its_words_not_its_type(error, named):
    from mha_checks.diagnosis.errors import same_failure
    switch_failure = {"AssertionError": variants.Failure(("assert", "")),
                      "RuntimeError": ValueError("operands could not be broadcast together with shapes (3,3) "
                                                 "(2,5,3,4) ()"),
                      "TypeError": TypeError("unsupported operand type(s) for +: 'float' and 'NoneType'"),
                      "ValueError": variants.Failure(variants.UNBATCHED)}[error["type"]]
    assert same_failure(error, switch_failure) is named
