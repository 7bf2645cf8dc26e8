"""mha_lib.grading: the checks behind the exercises, without nbgrader.

Every right answer passes; every known mistake fails with its own name in the message; a call to
a ready-made answer fails whatever it returns.
"""
import numpy as np
import pytest
import torch

from mha_lib import grading, reference

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def pitfalls_play_the_student(monkeypatch):
    """Here the 'student' is often a pitfall or _attention, both in grading.py: let them be called."""
    monkeypatch.setattr(grading, "_NOT_READY_MADE", {grading._THIS_FILE})


def raises(check, *args, **kwargs) -> str:
    with pytest.raises(grading.Mistake) as err:
        check(*args, **kwargs)
    return str(err.value)


# --- right answers pass -----------------------------------------------------------------------

def test_reference_answers_pass():
    x, w, b = RNG.normal(size=(2, 5, 3)), RNG.normal(size=(3, 7)), RNG.normal(size=7)
    grading.check_project(lambda x, w, b=None: x @ w if b is None else x @ w + b, x, w, b)
    grading.check_split_heads(lambda x, h: x.reshape(2, 5, h, -1).swapaxes(1, 2), RNG.normal(size=(2, 5, 12)), 3)
    heads = RNG.normal(size=(2, 3, 5, 4))
    grading.check_merge_heads(lambda x: x.swapaxes(1, 2).reshape(2, 5, 12), heads)
    w_o, b_o = RNG.normal(size=(12, 7)), RNG.normal(size=7)
    grading.check_output_projection(lambda x, w, b=None: x @ w + b, RNG.normal(size=(2, 5, 12)), w_o, b_o)
    grading.check_output_projection_per_head(
        lambda h, w, b=None: sum(h[:, i] @ w[4 * i:4 * i + 4] for i in range(3)) + b, heads, w_o, b_o)
    ws, bs = [RNG.normal(size=(5, 2)) for _ in range(3)], [RNG.normal(size=2) for _ in range(3)]
    grading.check_fuse_heads(lambda w, b=None: (np.hstack(w), None if b is None else np.hstack(b)), ws, bs)
    grading.check_fuse_heads(lambda w, b=None: (np.hstack(w), None), ws)


def test_the_mistake_free_attention_is_torchs():
    mha = grading.random_mha(12, 3, seed=1)
    q, k, v = grading.random_inputs(2, 5, 4, 12, seed=2)
    for causal in (False, True):
        ours = grading._attention(q, k, v, mha, causal)
        theirs = grading.torch_attention(q, k, v, mha, causal)
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b)
        grading.check_attention(lambda *args: grading._attention(*args), q, k, v, mha, causal)
        grading.check_attention_weights(lambda *args: grading._attention(*args), q, q, q, mha, causal)


def test_random_mha_has_no_zero_bias():
    mha = grading.random_mha(8, 2, seed=0)
    assert mha.batch_first and mha.in_proj_bias.abs().min() > 0 and mha.out_proj.bias.abs().min() > 0


# --- every known mistake is caught and named ----------------------------------------------------

NUMPY_CASES = [
    (grading.check_project, grading.PROJECT_PITFALLS,
     lambda: (RNG.normal(size=(2, 5, 3)), RNG.normal(size=(3, 7)), RNG.normal(size=7))),
    (grading.check_split_heads, grading.SPLIT_HEADS_PITFALLS, lambda: (RNG.normal(size=(2, 5, 12)), 3)),
    (grading.check_merge_heads, grading.MERGE_HEADS_PITFALLS, lambda: (RNG.normal(size=(2, 3, 5, 4)),)),
    (grading.check_output_projection, grading.OUTPUT_PROJECTION_PITFALLS,
     lambda: (RNG.normal(size=(2, 5, 6)), RNG.normal(size=(6, 4)), RNG.normal(size=4))),
    (grading.check_output_projection_per_head, grading.OUTPUT_PER_HEAD_PITFALLS,
     lambda: (RNG.normal(size=(2, 3, 5, 4)), RNG.normal(size=(12, 7)), RNG.normal(size=7))),
    (grading.check_fuse_heads, grading.FUSE_HEADS_PITFALLS,
     lambda: ([RNG.normal(size=(5, 2)) for _ in range(3)], [RNG.normal(size=2) for _ in range(3)])),
]


@pytest.mark.parametrize("check, pitfall, make_args",
                         [(c, p, a) for c, ps, a in NUMPY_CASES for p in ps], ids=lambda x: getattr(x, "name", ""))
def test_numpy_pitfall_is_caught_and_named(check, pitfall, make_args):
    message = raises(check, pitfall.fn, *make_args())
    assert pitfall.name in message
    assert "all different" in message or "is None" in message


@pytest.mark.parametrize("mistake", list(grading.ATTENTION_MISTAKES))
def test_attention_pitfall_is_caught_and_named(mistake):
    mha = grading.random_mha(15, 3, seed=3)
    q, k, v = grading.random_inputs(2, 6, 4, 15, seed=4)  # B=2, T_q=6, T_k=4, h=3, d_k=5
    messages = []
    for causal in (False, True):
        try:
            grading.check_attention(lambda *args: grading._attention(*args, mistake=mistake), q, k, v, mha, causal)
        except grading.Mistake as err:
            messages.append(str(err))
    assert messages, f"{mistake!r} went unnoticed"
    assert any(mistake in m for m in messages), messages


# --- messages ---------------------------------------------------------------------------------

def test_shape_message_names_the_axes():
    message = raises(grading.check_split_heads, lambda x, h: x.reshape(2, 5, h, 4).transpose(0, 2, 3, 1),
                     RNG.normal(size=(2, 5, 12)), 3)
    assert "expected (B, h, T, d_k) = (2, 3, 5, 4)" in message and "wrong order" in message


def test_unknown_mistake_points_at_a_value():
    message = raises(grading.check_merge_heads, lambda x: x.swapaxes(1, 2).reshape(2, 5, 12) + 1.0, RNG.normal(size=(2, 3, 5, 4)))
    assert "at index (0, 0, 0)" in message and "none of the known mistakes" in message


def test_missing_return_and_not_implemented():
    assert "is a `return` missing?" in raises(grading.check_merge_heads, lambda x: None, np.zeros((1, 2, 3, 4)))

    def todo(x):
        raise NotImplementedError()
    assert "not written yet" in raises(grading.check_merge_heads, todo, np.zeros((1, 2, 3, 4)))


def test_nan_weights_blame_the_mask():
    mha = grading.random_mha(8, 2, seed=0)
    x, _, _ = grading.random_inputs(1, 3, 3, 8, seed=0)

    def fully_masked(q, k, v, m, c):
        out, w = grading._attention(q, k, v, m, c)
        return out * np.nan, w * np.nan
    assert "does your mask hide every key" in raises(grading.check_attention, fully_masked, x, x, x, mha, True)


def test_visible_weight_checks():
    mha = grading.random_mha(8, 2, seed=0)
    x, _, _ = grading.random_inputs(2, 3, 3, 8, seed=1)
    wrong_axis = lambda *a: grading._attention(*a, mistake="softmax over the wrong axis")  # noqa: E731
    assert "softmax ran over the queries" in raises(grading.check_attention_weights, wrong_axis, x, x, x, mha, False)
    after = lambda *a: grading._attention(*a, mistake="mask applied after the softmax")  # noqa: E731
    assert "before the softmax" in raises(grading.check_attention_weights, after, x, x, x, mha, True)
    inverted = lambda *a: grading._attention(*a, mistake="mask the wrong way round (the future kept, the past hidden)")  # noqa: E731,E501
    assert "keys after i" in raises(grading.check_attention_weights, inverted, x, x, x, mha, True)


# --- ready-made answers -----------------------------------------------------------------------

def test_calling_mha_lib_earns_nothing():
    message = raises(grading.check_split_heads, reference.split_heads, RNG.normal(size=(2, 5, 12)), 3)
    assert "mha_lib.reference.split_heads" in message and "ready-made" in message
    aliased = reference.merge_heads  # held before the call: still seen
    assert "ready-made" in raises(grading.check_merge_heads, lambda x: aliased(x), RNG.normal(size=(2, 3, 5, 4)))


def test_calling_the_graders_own_helpers_earns_nothing(monkeypatch):
    monkeypatch.setattr(grading, "_NOT_READY_MADE", set())
    ws = [RNG.normal(size=(5, 2)) for _ in range(3)]
    message = raises(grading.check_fuse_heads, grading._fuse_columns, ws)
    assert "mha_lib.grading._fuse_columns" in message and "ready-made" in message


@pytest.mark.parametrize("how", ["sdpa", "module", "functional"])
def test_calling_torch_attention_earns_nothing(how):
    mha = grading.random_mha(8, 2, seed=0)
    x, _, _ = grading.random_inputs(2, 3, 3, 8, seed=1)

    def answer(q, k, v, m, causal):
        out, weights = grading._attention(q, k, v, m, causal)
        if how == "sdpa":
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
        elif how == "module":
            m(q, k, v)
        else:
            torch.nn.functional.multi_head_attention_forward(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), 8, 2, m.in_proj_weight, m.in_proj_bias,
                None, None, False, 0.0, m.out_proj.weight, m.out_proj.bias)
        return out, weights
    assert "ready-made" in raises(grading.check_attention, answer, x, x, x, mha, False)


def test_the_guard_leaves_the_profiler_as_it_found_it():
    import sys
    before = sys.getprofile()
    grading.check_merge_heads(lambda x: x.swapaxes(1, 2).reshape(2, 5, 12), RNG.normal(size=(2, 3, 5, 4)))
    raises(grading.check_merge_heads, reference.merge_heads, RNG.normal(size=(2, 3, 5, 4)))
    assert sys.getprofile() is before
