"""Exercise 5: multi_head_attention.

Causes: the mistakes of :mod:`mha_checks.attention`, alone or two at a time, with a scale and a dropout
fitted on the failing call, named only where they reproduce every call of the test
(:func:`search.search`). Observations when none does, each verified on this call alone: the layout of
the weights and the heads they hold, whether the rows are distributions (and over which axis), where
their zeros are, a scale that gives them, whether the weights are right and the output not, and which
batch elements are right. An observation says what differs; it names no cause."""
import numpy as np

from .. import arrays, attention
from ..arrays import dims
from ..cases import MhaWeights, causal_of
from .common import Fail, Spec, _np, compare, read_array, read_pair

_INPUTS: dict = {}  # id(case) -> (case, Inputs): a case's projections computed once for a whole search


def attention_inputs(case) -> attention.Inputs:
    hit = _INPUTS.get(id(case))
    if hit is not None and hit[0] is case:
        return hit[1]
    query, key, value, mha = case.args[:4]
    weights = mha.weights if isinstance(mha, MhaWeights) else mha
    inp = attention.Inputs(_np(query), _np(key), _np(value), {k: _np(v) for k, v in weights.items()},
                           int(mha.num_heads), causal_of(case))
    if len(_INPUTS) >= 256:
        _INPUTS.clear()
    _INPUTS[id(case)] = (case, inp)
    return inp


def _describe_mha(case):
    query, key, _, mha = case.args[:4]
    causal = f", causal={causal_of(case)}" if len(case.args) > 4 else ""  # (left out: the default, False)
    return (f"multi_head_attention(query, key, value, mha{causal}) with query "
            f"{dims('B, T_q, d_model', np.shape(query))}, key and value {dims('B, T_k, d_model', np.shape(key))}, "
            f"num_heads={mha.num_heads}")


def _mha_sizes(case):
    (b, t_q, d), t_k, h = np.shape(case.args[0]), np.shape(case.args[1])[1], int(case.args[3].num_heads)
    return {"B": b, "T_q": t_q, "T_k": t_k, "d_model": d, "h": h, "d_k": d // h}


def _check_mha(case, result, call):
    inp = attention_inputs(case)
    sizes = inp.sizes
    got_out, got_w = read_pair(result, call, "out, weights")
    got_out = read_array(got_out, call, "the output")
    got_w = read_array(got_w, call, "the attention weights")
    tol = max(arrays.tolerance(arrays.result_dtype(got_out)), arrays.tolerance(arrays.result_dtype(got_w)))
    want_out, want_w = attention.forward(inp)
    if case.expected is not None:
        want_out, want_w = (_np(e) for e in case.expected)
    if got_out.ndim == 4 and got_w.ndim == 3:
        head = (f"{call} returned the first item with the weights' shape {tuple(got_out.shape)} and the second with "
                f"the output's {tuple(got_w.shape)}.")
        raise Fail(f"{head} Return (out, weights).", "pair in the wrong order (observed)", head, searchable=True)

    def observe(_):
        return localise(got_out, got_w, inp, tol, want_out, want_w)
    compare(call, got_out, want_out, "B, T_q, d_model", "the output", tol, observe, sizes, shape_only=True)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, observe, sizes, shape_only=True)
    if case.check == "shape":
        return
    if case.check == "weights":
        return weight_properties(call, got_w, inp, tol)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, observe, sizes)
    compare(call, got_out, want_out, "B, T_q, d_model", "the output", tol, observe, sizes)


# --- causes ----------------------------------------------------------------------------------------

def _model(case, keys, call=None):
    """(out, weights) with the switches on; a dropout keeps the weights the answer kept, a mask kept between
    calls is the one built for the first causal call of the process."""
    kept = None
    if any(isinstance(k, tuple) and k[0] == "dropout" for k in keys):
        kept = arrays.as_array(call.got[1]) != 0
    if "mask_kept" in keys:
        earlier = (*call.before, case) if call is not None else (case,)
        first = next(c for c in earlier if c.function == case.function and causal_of(c) or c is case)
        sizes = attention_inputs(first).sizes
        keys = (keys - {"mask_kept"}) | {("mask of", sizes["T_q"], sizes["T_k"])}
    return attention.forward(attention_inputs(case), keys, kept)


def _switches(case, got) -> list:
    """The catalogue, and the scale and the dropout rate the failing answer's weights fit (if they do)."""
    fitted = []
    try:
        weights = arrays.as_array(got[1])
        inp = attention_inputs(case)
        scale = attention.fit_scale(weights, inp)
        fitted += [attention.scaled_by(scale)] if scale is not None and np.isfinite(scale) else []
        p = attention.dropout_rate(weights, attention.forward(inp)[1], arrays.tolerance(arrays.result_dtype(weights)))
        fitted += [attention.dropped(p)] if p is not None else []
    except Exception:  # noqa: BLE001 - weights that cannot be read fit nothing
        pass
    return attention.SWITCHES + fitted


def _same(case, got, predicted, dtype) -> bool:
    """The pair (out, weights) as the grade reads it: both shapes, then the values of both (the weights'
    alone in the weights test, none in the shape test)."""
    if not isinstance(got, tuple | list) or len(got) != 2:
        return False
    pairs = [(arrays.as_array(g), np.asarray(p)) for g, p in zip(got, predicted)]
    if any(g.shape != p.shape for g, p in pairs) or case.check == "shape":
        return all(g.shape == p.shape for g, p in pairs)
    tol = arrays.tolerance(dtype) if dtype else max(arrays.tolerance(arrays.result_dtype(g)) for g, _ in pairs)
    return all(arrays.all_close(g, p, tol) for g, p in (pairs[1:] if case.check == "weights" else pairs))


# --- observations ----------------------------------------------------------------------------------

def heads_left_out(got_w, want_w, tol) -> tuple[str, str] | None:
    """(label, sentence) when the weights hold some of the heads, each right, and miss the others."""
    if got_w.ndim != 4 or got_w.shape[0] != want_w.shape[0] or got_w.shape[2:] != want_w.shape[2:] \
            or not 0 < got_w.shape[1] < want_w.shape[1]:
        return None
    kept = [next((i for i in range(want_w.shape[1]) if arrays.all_close(got_w[:, j], want_w[:, i], tol)), None)
            for j in range(got_w.shape[1])]
    if None in kept:
        return None
    missing = [i for i in range(want_w.shape[1]) if i not in kept]
    return ("weights of some heads only (observed)", f"On this call your weights hold heads {kept} of the h = "
            f"{want_w.shape[1]}, each right, and not head{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))}: loop over every head, range(h) (or compute all heads at once).")


def batch_note(got, want, tol) -> str:
    """What the batch elements show, when the first is right and another is not (nothing otherwise)."""
    if got.shape != want.shape or got.shape[0] < 2 or not arrays.all_close(got[:1], want[:1], tol):
        return ""
    wrong = [i for i in range(1, got.shape[0]) if not arrays.all_close(got[i:i + 1], want[i:i + 1], tol)]
    if not wrong:
        return ""
    return (f" Batch element 0 is right and element{'s' if len(wrong) > 1 else ''} {', '.join(map(str, wrong))} "
            "not: each batch element attends only to its own keys, so look for a reshape that lays the batch end "
            "to end or an operation over dim=0.")


def numbers(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` written with as many digits as it takes to tell them apart (up to 10)."""
    for digits in range(4, 11):
        x, y = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if x != y:
            return x, y
    return x, y


CHECKLIST = ("check, in order, the projections (rows 0:d, d:2d and 2d:3d of mha.in_proj_weight, x @ W.T + b), "
             "the split into heads ((B, T, h, d_k), then swap axes 1 and 2), the scores q @ k.transpose(-2, -1) "
             "and their scale 1/sqrt(d_k)")


def localise(got_out, got_w, inp, tol, want_out, want_w):
    """(label, sentence): what this call's answer shows where it departs, each fact verified on it."""
    layout = attention.weights_layout_story(got_w, want_w, tol) or heads_left_out(got_w, want_w, tol)
    if layout or got_w.shape != want_w.shape:
        return layout
    if not arrays.all_close(got_w, want_w, tol):
        return weights_differ(got_w, inp, tol, want_w)
    k = float((got_out * want_out).sum() / max((want_out * want_out).sum(), 1e-300))
    if got_out.shape == want_out.shape and arrays.all_close(got_out, k * want_out, tol):
        return ("output a multiple of the right one (observed)", f"The weights are right; on this call the output "
                f"is {k:.4g} times the right one: remove the extra factor (out = F.linear(concat, "
                "mha.out_proj.weight, mha.out_proj.bias)).")
    return ("weights right, output differs (observed)", "The weights are right, so the difference comes after the "
            "softmax: check weights @ V (the value projection: rows 2d:3d of mha.in_proj_weight and b_v), the merge "
            "((B, h, T_q, d_k) -> (B, T_q, h, d_k) -> (B, T_q, d_model)) and W^O." + batch_note(got_out, want_out, tol))


def weights_differ(got_w, inp, tol, want_w):
    """(label, sentence) for weights of the right shape and the wrong values."""
    if np.isnan(got_w).any():
        story = inp.causal and attention.mask_story(np.nan_to_num(got_w, nan=0.0), inp, tol)
        if story:  # the mask hides every key from some queries: their rows are NaN
            return ("NaN in the weights (observed)", "On this call the zeros of your weights are misplaced: "
                    f"{story[0]}, "
                    f"so some rows hide every key (NaN); {story[1]}.")
        return ("NaN in the weights (observed)", "NaN appears in the weights: a row whose scores are all -inf, or an "
                "inf - inf, gives NaN.")
    p = attention.dropout_rate(got_w, want_w, tol)
    if p is not None:
        return ("weights zeroed and rescaled (observed)", f"On this call some weights are 0 and the others are the "
                f"right ones times {1 / (1 - p):.4g} = 1/(1-p) for p = {p:.2g}, as dropout does: attention here has "
                "no dropout (F.dropout drops even outside training unless training=False).")
    rows_ok = np.allclose(got_w.sum(-1), 1.0, atol=100 * tol) and (got_w >= -tol).all()
    if not rows_ok:
        axis = attention.softmax_axis_story(got_w, tol)
        if axis:
            return ("weights sum to 1 over another axis (observed)", f"On this call your weights sum to 1 over "
                    f"{axis}, not over the keys: use torch.softmax(scores, dim=-1).")
        return ("weights not distributions (observed)", "Each query's row of weights should be a distribution over "
                "the keys (non-negative, summing to 1), and on this call it is not: torch.softmax(scores, dim=-1)."
                + batch_note(got_w, want_w, tol))
    story = attention.mask_story(got_w, inp, tol)
    if story:
        return "the mask's zeros misplaced (observed)", f"On this call {story[0]}; {story[1]}."
    s = inp.sizes
    scale = attention.fit_scale(got_w, inp)
    if scale is not None and arrays.all_close(got_w, attention.forward(inp, {("scale by", scale)})[1], tol):
        said, right = numbers(scale, float(np.sqrt(s["d_k"])))
        return ("scores scaled differently (observed)", f"On this call your weights are the softmax of the scores "
                f"divided by {said}, not by sqrt(d_k) = {right} (d_k = d_model / h = {s['d_k']}): divide "
                "q @ k.transpose(-2, -1) by math.sqrt(d_k).")
    per_head = attention.fit_scale_per_head(got_w, inp)
    if per_head is not None and arrays.all_close(got_w, attention.weights_with_divisors(inp, per_head), tol):
        said = ", ".join(f"{v:.3g}" for v in per_head)
        return ("scores scaled differently in each head (observed)", f"On this call each head's scores are divided "
                f"by its own factor ({said}), not all by sqrt(d_k) = {np.sqrt(s['d_k']):.4g}: divide every head's "
                "scores by math.sqrt(d_k).")
    return ("weights differ (observed)", "Your weights are distributions over the keys with zeros where the mask "
            f"puts them, but not the right ones: {CHECKLIST}." + batch_note(got_w, want_w, tol))


def weight_properties(call, w, inp, tol):
    """The weights are distributions over the keys and, if causal, give 0 to later keys (an observation
    of what is not; the cause search names a mistake that reproduces them)."""
    problem = _weight_problem(w, inp, tol)
    if problem is not None:
        text, label, why = problem
        raise Fail(f"{call}: {text} {why}", label, f"{call}: {text}", searchable=True)


def _weight_problem(w, inp, tol):
    """(what is wrong, label, what this call shows) or None."""
    want = attention.forward(inp)[1]
    layout = attention.weights_layout_story(w, want, tol)
    if layout:
        return ("the attention weights are not laid out as (B, h, T_q, T_k).", *layout)
    if np.isnan(w).any():
        first = tuple(int(i) for i in np.argwhere(np.isnan(w))[0])
        return (f"the attention weights contain NaN (first at index {first}).", "NaN in the weights (observed)",
                "A softmax gives NaN on a row whose scores are all -inf or hold inf - inf: print that row's scores.")
    if (w < -tol).any():
        return ("some attention weights are negative; a softmax gives weights in [0, 1].",
                "negative weights (observed)", "Return torch.softmax(scores, dim=-1).")
    rows = w.sum(axis=-1)
    if not np.allclose(rows, 1.0, atol=100 * tol):
        text = f"each query's weights over the keys should sum to 1; one row sums to " \
               f"{rows.flat[np.argmax(np.abs(rows - 1.0))]:.4g}."
        axis = attention.softmax_axis_story(w, tol)
        p = attention.dropout_rate(w, want, tol)
        if p is not None:
            return (text, "weights zeroed and rescaled (observed)", f"Some weights are 0 and the others are the right "
                    f"ones times {1 / (1 - p):.4g} = 1/(1-p), as dropout with p = {p:.2g} does: remove it.")
        if axis:
            return (text, "weights sum to 1 over another axis (observed)",
                    f"They sum to 1 over {axis} instead: the softmax must run over the keys, dim=-1.")
        return (text, "weights not distributions (observed)", "Return torch.softmax(scores, dim=-1)."
                + batch_note(w, want, tol))
    story = attention.mask_story(w, inp, tol)
    if story:
        what, fix = story
        return (f"with causal={inp.causal}, {what}.", "the mask's zeros misplaced (observed)",
                fix[0].upper() + fix[1:] + ".")
    return None


SPEC = Spec(_describe_mha, _check_mha, _mha_sizes, _model, _switches, _same, attention.compatible)
