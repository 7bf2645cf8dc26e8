"""Exercise 5: multi_head_attention. Diagnosis, in order: the mistakes of :mod:`mha_checks.attention`
alone and two at a time (named only when one reproduces both returned arrays); otherwise the stage
where the answer departs (the weights show everything up to the softmax), a fitted scale factor,
the mask's zeros and the merge seen through W^O."""
import math

import numpy as np

from .. import arrange, arrays, attention, variants
from ..arrays import dims
from ..cases import MhaWeights
from .common import Fail, _np, compare, find_variant, first_matches, named, read_array, read_pair


def attention_inputs(case) -> attention.Inputs:
    query, key, value, mha, causal = case.args
    weights = mha.weights if isinstance(mha, MhaWeights) else mha
    return attention.Inputs(_np(query), _np(key), _np(value), {k: _np(v) for k, v in weights.items()},
                            int(mha.num_heads), bool(causal))


def _describe_mha(case):
    query, key, _, mha, causal = case.args
    return (f"multi_head_attention(query, key, value, mha, causal={bool(causal)}) with query "
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
    if got_out.ndim == 4 and got_w.ndim == 3:
        raise Fail(f"{call} returned (weights, out): the first item has the weights' shape "
                   f"{tuple(got_out.shape)} and the second the output's {tuple(got_w.shape)}; return (out, weights).",
                   "pair in the wrong order")
    tol = max(arrays.tolerance(arrays.result_dtype(got_out)), arrays.tolerance(arrays.result_dtype(got_w)))
    want_out, want_w = attention.forward(inp)
    if case.expected is not None:
        want_out, want_w = (_np(e) for e in case.expected)
    cache: dict = {}

    def explain(_):
        if "combo" not in cache:
            cache["combo"] = _find_pair(got_out, got_w, inp, tol)
        combo = cache["combo"]
        if combo:
            return named(combo)
        return localise(got_out, got_w, inp, tol, want_out, want_w)
    compare(call, got_out, want_out, "B, T_q, d_model", "the output", tol, explain, sizes, shape_only=True)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, explain, sizes, shape_only=True)
    if case.check == "shape":
        return
    if case.check == "weights":
        return weight_properties(call, got_w, inp, tol)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, explain, sizes)
    compare(call, got_out, want_out, "B, T_q, d_model", "the output", tol, explain, sizes)


def _find_pair(got_out, got_w, inp, tol) -> list[tuple]:
    """The catalogued mistakes (every single one, else the first pair) that give both arrays exactly."""
    def gives(combo) -> bool:
        try:
            out, w = attention.forward(inp, frozenset(s.key for s in combo))
        except Exception:  # noqa: BLE001 - a mistake that cannot run here explains nothing
            return False
        return arrays.all_close(got_w, w, tol) and arrays.all_close(got_out, out, tol)
    return first_matches(attention.SWITCHES, gives, attention.compatible)


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
    return ("heads left out", f"Your weights hold heads {kept} of the h = {want_w.shape[1]}, each right: heads left "
            f"out (head{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}); loop over every head, "
            "range(h) (or compute all heads at once).")


def batch_note(got, want, tol) -> str:
    """What the batch elements show, when the first is right and another is not (nothing otherwise)."""
    if got.shape != want.shape or got.shape[0] < 2 or not arrays.all_close(got[:1], want[:1], tol):
        return ""
    wrong = [i for i in range(1, got.shape[0]) if not arrays.all_close(got[i:i + 1], want[i:i + 1], tol)]
    if not wrong:
        return ""
    return (f" Batch element 0 is right and element{'s' if len(wrong) > 1 else ''} {', '.join(map(str, wrong))} "
            "not: something mixes the batch elements (a reshape that lays the batch end to end, an operation over "
            "dim=0); each element attends only to its own keys.")


def numbers(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` written with as many digits as it takes to tell them apart (up to 10)."""
    for digits in range(4, 11):
        x, y = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if x != y:
            return x, y
    return x, y


def localise(got_out, got_w, inp, tol, want_out, want_w):
    """(label, sentence): where the answer first departs from the reference, when no variant explains it."""
    layout = attention.weights_layout_story(got_w, want_w, tol) or heads_left_out(got_w, want_w, tol)
    if layout or got_w.shape != want_w.shape:
        return layout
    s = inp.sizes
    if not arrays.all_close(got_w, want_w, tol):
        if np.isnan(got_w).any():
            story = inp.causal and attention.mask_story(np.nan_to_num(got_w, nan=0.0), inp, tol)
            if story:  # the mask hides every key from some queries: their rows are NaN
                label, what, fix = story
                return label, f"The weights depart at the mask: {what}, so some rows hide every key; {fix}."
            return ("NaN in the weights", "NaN appears in the weights: a row whose scores are all -inf, or an "
                    "inf - inf, gives NaN.")
        rows_ok = np.allclose(got_w.sum(-1), 1.0, atol=100 * tol) and (got_w >= -tol).all()
        p = attention.dropout_rate(got_w, want_w, tol)
        if p is not None:
            return dropout_story(p)
        if not rows_ok:
            axis = attention.softmax_axis_story(got_w, tol)
            if axis:
                return (f"softmax over the wrong axis ({axis})", f"The weights depart at the softmax: they sum "
                        f"to 1 over {axis}, not over the keys; use torch.softmax(scores, dim=-1).")
            return ("departs at the softmax", "The weights depart at the softmax: each query's row should be a "
                    "distribution over the keys (non-negative, summing to 1): torch.softmax(scores, dim=-1)."
                    + batch_note(got_w, want_w, tol))
        story = attention.mask_story(got_w, inp, tol)
        if story:
            label, what, fix = story
            return label, f"The weights depart at the mask: {what}; {fix}."
        scale = attention.fit_scale(got_w, inp)
        if scale is not None:
            name = attention.name_scale(scale, s)
            said, right = numbers(scale, math.sqrt(s["d_k"]))
            said += f" = {name}" if name else ""
            label = f"scores divided by {name or 'a wrong factor'} instead of sqrt(d_k)"
            return label, (f"The weights depart at the scale: your scores are divided by {said}, not by "
                           f"sqrt(d_k) = {right} (d_k = d_model / h = {s['d_k']}); divide "
                           "q @ k.transpose(-2, -1) by math.sqrt(d_k).")
        per_head = attention.fit_scale_per_head(got_w, inp)
        if per_head is not None:
            said = ", ".join(f"{v:.3g}" for v in per_head)
            return ("scores divided by a different factor in each head", "The weights depart at the scale: each "
                    f"head's scores are divided by its own factor ({said}), not all by sqrt(d_k) = "
                    f"{math.sqrt(s['d_k']):.4g}; divide every head's scores by math.sqrt(d_k).")
        for sw in attention.SWITCHES:
            if attention.STAGE_OF[sw.key] > 1:
                continue
            scale = attention.fit_scale(got_w, inp, frozenset({sw.key}))
            if scale is None:
                continue
            off = "" if math.isclose(scale, math.sqrt(s["d_k"]), rel_tol=2e-3) else \
                f" and the scores are divided by {scale:.4g}, not sqrt(d_k) = {math.sqrt(s['d_k']):.4g}"
            label, text = named((sw,), f"The weights depart before the softmax, at the projection or the split{off}. ")
            return label + (" + wrong scale" if off else ""), text
        return ("departs before the softmax", "The weights depart before the softmax: the scores Q K^T differ "
                "from the reference; check the projections (rows 0:d and d:2d of mha.in_proj_weight, "
                "x @ W.T + b) and the split into heads ((B, T, h, d_k), then swap axes 1 and 2)."
                + batch_note(got_w, want_w, tol))
    # the weights are right to the tolerance; a scale off by less still moves the output
    scale = attention.fit_scale(got_w, inp)
    if scale is not None and not math.isclose(scale, math.sqrt(s["d_k"]), rel_tol=1e-5):
        said, right = numbers(scale, math.sqrt(s["d_k"]))
        return ("scores divided by a wrong factor instead of sqrt(d_k)", f"The weights are close but the scores "
                f"are divided by {said}, not by sqrt(d_k) = {right} (a rounded constant?); the output shows the "
                "difference: divide by math.sqrt(d_k).")
    # the weights are right: the departure is after the softmax
    w_o, b_o = inp.weights["out_proj_weight"], inp.weights["out_proj_bias"]
    q, k, v, _ = attention.projections(inp)
    heads = want_w @ v                                        # (B, h, T_q, d_k)
    try:
        concat = (got_out - b_o) @ np.linalg.inv(w_o.T)       # what went into W^O
    except np.linalg.LinAlgError:
        concat = None
    if concat is not None:
        ref_concat = heads.transpose(0, 2, 1, 3).reshape(concat.shape)
        if arrays.all_close(concat, ref_concat, 10 * tol * np.linalg.cond(w_o)):  # inverting W^O scales errors
            return ("departs at W^O", "The weights and the merged heads are right; the output departs at W^O: "
                    "F.linear(concat, mha.out_proj.weight, mha.out_proj.bias).")
        names = {"B": s["B"], "h": s["h"], "T_q": s["T_q"], "d_k": s["d_k"]}
        found = arrange.analyse(concat, heads, names, 1e-6)
        if found is not None and found.perm.index(2) < found.perm.index(0):
            return named((variants.Switch("", *variants.MERGE_B_T),), "The weights are right; the output "
                         f"departs at the merge: your heads are merged as {found.code('heads')}. ")
        if found is not None:
            return (f"heads merged as {found.code('heads')}", "The weights are right; the output departs at the "
                    f"merge: your heads are merged as {found.code('heads')}, not heads.transpose(1, 2)"
                    ".reshape(B, T_q, d_model).")
    k = float((got_out * want_out).sum() / max((want_out * want_out).sum(), 1e-300))
    if arrays.all_close(got_out, k * want_out, 10 * tol):
        return ("output scaled by a constant", f"The weights are right; the output is {k:.4g} times the right one: "
                "remove the extra factor (out = F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)).")
    return ("departs after the softmax", "The weights are right; the output departs after the softmax, in "
            "weights @ V (the value projection: rows 2d:3d of mha.in_proj_weight and b_v), the merge "
            "((B, h, T_q, d_k) -> (B, T_q, h, d_k) -> (B, T_q, d_model)) or W^O." + batch_note(got_out, want_out, tol))


def dropout_story(p: float) -> tuple[str, str]:
    return ("dropout applied to the weights", f"The weights depart after the softmax: some are 0 and the others "
            f"are scaled by 1/(1-p), dropout with p = {p:.2g} (F.dropout drops even outside training unless "
            "training=False): attention here has no dropout, remove it.")


WEIGHT_SWITCHES = [s for s in attention.SWITCHES if attention.STAGE_OF[s.key] in (4, 5)]


def weight_properties(call, w, inp, tol):
    """The weights are distributions over the keys and, if causal, give 0 to later keys; a failure
    is explained by the mask or softmax mistake (or pair) that gives exactly these weights."""
    problem = _weight_problem(w, inp, tol)
    if problem is None:
        return
    text, label, why = problem
    combo = find_variant(w, tol, WEIGHT_SWITCHES, lambda m: attention.forward(inp, m)[1], ok=attention.compatible)
    if combo:
        label, why = named(combo)
    raise Fail(f"{call}: {text} {why}", label)


def _weight_problem(w, inp, tol):
    """(what is wrong, label, why) or None."""
    layout = attention.weights_layout_story(w, attention.forward(inp)[1], tol)
    if layout:
        return ("the attention weights are not laid out as (B, h, T_q, T_k).", *layout)
    if np.isnan(w).any():
        first = tuple(int(i) for i in np.argwhere(np.isnan(w))[0])
        return (f"the attention weights contain NaN (first at index {first}).", "NaN in the weights",
                "A softmax gives NaN on a row whose scores are all -inf or hold inf - inf: print that row's scores.")
    if (w < -tol).any():
        return ("some attention weights are negative; a softmax gives weights in [0, 1].", "negative weights",
                "Return torch.softmax(scores, dim=-1).")
    rows = w.sum(axis=-1)
    if not np.allclose(rows, 1.0, atol=100 * tol):
        text = f"each query's weights over the keys should sum to 1; one row sums to " \
               f"{rows.flat[np.argmax(np.abs(rows - 1.0))]:.4g}."
        axis = attention.softmax_axis_story(w, tol)
        p = attention.dropout_rate(w, attention.forward(inp)[1], tol)
        if p is not None:
            return (text, *dropout_story(p))
        if axis:
            return (text, f"softmax over the wrong axis ({axis})",
                    f"They sum to 1 over {axis} instead: the softmax must run over the keys, dim=-1.")
        return (text, "weights are not a softmax over the keys",
                "Return torch.softmax(scores, dim=-1)." + batch_note(w, attention.forward(inp)[1], tol))
    story = attention.mask_story(w, inp, tol)
    if story:
        label, what, fix = story
        return (f"with causal={inp.causal}, {what}.", label, fix[0].upper() + fix[1:] + ".")
    return None

