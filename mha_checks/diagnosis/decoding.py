"""Exercises 6 and 7: causal_attention, decode_step, generate, repeat_kv, grouped_query_attention.

Causes: the switches of :mod:`mha_checks.decoding` (a decode step's mistakes are searched in the generation
loop too, whose own decode step may hold them), alone or two at a time, named only where they reproduce
every call of the test (:func:`common.search`). Observation when none does: what differs, and where the
zeros of the attention weights are when they are not where the mask puts them."""
import numpy as np

from .. import arrays, decoding
from ..arrays import dims
from .common import Fail, Spec, _np, compare, read_array, read_pair


def _shape(a) -> tuple:
    return tuple(np.shape(a))


# --- observations ------------------------------------------------------------------------------------

def mask_story(got_w: np.ndarray, causal: bool, tol: float) -> tuple[str, str] | None:
    """(label, sentence) when the weights' zeros are not where the mask puts them (tril(T_k - T_q))."""
    if got_w.ndim != 4:
        return None
    t_q, t_k = got_w.shape[-2:]
    zero = np.all(np.abs(got_w) <= tol, axis=(0, 1))
    right = ~np.tril(np.ones((t_q, t_k), dtype=bool), t_k - t_q) if causal else np.zeros((t_q, t_k), dtype=bool)
    if np.array_equal(zero, right):
        return None
    full = np.ones((t_q, t_k), dtype=bool)
    shift = next((s for s in range(1 - t_q, t_k) if np.array_equal(zero, ~np.tril(full, s))), None)
    where = "" if shift is None else (
        "query i sees keys 0..i" if shift == 0 else f"query i sees keys 0..i{shift:+d}")
    if not causal:
        return ("the mask's zeros misplaced (observed)", "On this call some weights are 0 although causal is "
                "False: mask only when causal is True.")
    if not zero.any():
        return ("the mask's zeros misplaced (observed)", "On this call no key after a query gets weight 0: "
                + decoding.MASK_FIX + ".")
    said = f"{where} (tril({shift}))" if where else "the zeros of your weights are not those of the causal mask"
    return ("the mask's zeros misplaced (observed)", f"On this call {said}, where query i may see keys "
            f"0..i{t_k - t_q:+d} (tril(T_k - T_q) = tril({t_k - t_q})): {decoding.MASK_FIX}.")


def _pair_check(case, result, call, want, axes_out: str, causal: bool):
    """(out, weights) against ``want``: shapes, then the weights' values, then the output's."""
    got_out, got_w = read_pair(result, call, "out, weights", searchable=True)
    got_out = read_array(got_out, call, "the output")
    got_w = read_array(got_w, call, "the attention weights")
    tol = max(arrays.tolerance(arrays.result_dtype(got_out)), arrays.tolerance(arrays.result_dtype(got_w)))
    want_out, want_w = want if case.expected is None else (_np(e) for e in case.expected)
    sizes = SPECS_SIZES[case.function](case)

    def observe(_):
        return mask_story(got_w, causal, tol) if got_w.shape == want_w.shape else None
    compare(call, got_out, want_out, axes_out, "the output", tol, observe, sizes, shape_only=True)
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, observe, sizes, shape_only=True)
    if case.check == "shape":
        return
    compare(call, got_w, want_w, "B, h, T_q, T_k", "the attention weights", tol, observe, sizes)
    compare(call, got_out, want_out, axes_out, "the output", tol, observe, sizes)


def same_nested(case, got, predicted, dtype) -> bool:
    """The answer has the switch's structure (arrays, pairs of them), the same shapes and, unless only shapes
    are checked, the same values."""
    if isinstance(predicted, tuple | list):
        return isinstance(got, tuple | list) and len(got) == len(predicted) and all(
            same_nested(case, g, p, dtype) for g, p in zip(got, predicted))
    if isinstance(got, tuple | list):
        return False
    g, p = arrays.as_array(got), np.asarray(predicted)
    if g.shape != p.shape or case.check == "shape":
        return g.shape == p.shape
    return arrays.all_close(g, p, arrays.tolerance(dtype or arrays.result_dtype(g)))


# --- exercise 6, part A: causal_attention --------------------------------------------------------------

def _qkv(case):
    return tuple(_np(a) for a in case.args[:3])


def _attention_sizes(case):
    (b, h, t_q, d_k), (_, g, t_k, _), d_v = _shape(case.args[0]), _shape(case.args[1]), _shape(case.args[2])[-1]
    sizes = {"B": b, "h": h, "T_q": t_q, "T_k": t_k, "d_k": d_k, "d_v": d_v}
    return sizes if case.function == "causal_attention" else {"B": b, "h": h, "g": g, **{
        k: sizes[k] for k in ("T_q", "T_k", "d_k", "d_v")}}


def _describe_attention(case):
    q, k, v = case.args[:3]
    return (f"causal_attention(q, k, v) with q {dims('B, h, T_q, d_k', _shape(q))}, k "
            f"{dims('B, h, T_k, d_k', _shape(k))}, v {dims('B, h, T_k, d_v', _shape(v))}")


def _check_attention(case, result, call):
    _pair_check(case, result, call, decoding.causal_attention(*_qkv(case)), "B, h, T_q, d_v", True)


CAUSAL_ATTENTION = Spec(_describe_attention, _check_attention, _attention_sizes,
                        lambda case, keys, call=None: decoding.causal_attention(*_qkv(case), keys),
                        lambda case, got: decoding.ATTENTION_SWITCHES, same_nested, decoding.compatible)


# --- exercise 6, part B: decode_step ------------------------------------------------------------------

def _step_inputs(case):
    x, cache, attn = case.args
    return _np(x), _np(cache[0]), _np(cache[1]), {k: _np(v) for k, v in attn.weights.items()}, int(attn.num_heads)


def _step_sizes(case):
    x, cache, attn = case.args
    (b, t_new, d), h = _shape(x), int(attn.num_heads)
    return {"B": b, "T_new": t_new, "T_cached": _shape(cache[0])[2], "d_model": d, "h": h, "d_k": d // h}


def _describe_step(case):
    x, cache, attn = case.args
    return (f"decode_step(x, cache, attn) with x {dims('B, T_new, d_model', _shape(x))}, the cached keys and values "
            f"{dims('B, h, T_cached, d_k', _shape(cache[0]))}, attn.num_heads = {attn.num_heads}")


def _check_step(case, result, call):
    x, ck, cv, weights, h = _step_inputs(case)
    want_out, (want_k, want_v) = decoding.decode_step(x, ck, cv, weights, h)
    got_out, got_cache = read_pair(result, call, "out, (keys, values)", searchable=True)
    got_out = read_array(got_out, call, "the output")
    got_k, got_v = read_pair(got_cache, f"{call}: the cache returned", "keys, values", searchable=True)
    got_k, got_v = read_array(got_k, call, "the keys returned"), read_array(got_v, call, "the values returned")
    tol = max(arrays.tolerance(arrays.result_dtype(a)) for a in (got_out, got_k, got_v))
    sizes = _step_sizes(case)

    def observe(_):
        return None
    for got, want, axes, what in ((got_out, want_out, "B, T_new, d_model", "the output"),
                                  (got_k, want_k, "B, h, T_cached + T_new, d_k", "the keys returned (the new cache)"),
                                  (got_v, want_v, "B, h, T_cached + T_new, d_k", "the values returned (the new cache)")):
        compare(call, got, want, axes, what, tol, observe, sizes, shape_only=True)
    if case.check == "shape":
        return
    for got, want, axes, what in ((got_k, want_k, "B, h, T_cached + T_new, d_k", "the keys returned (the new cache)"),
                                  (got_v, want_v, "B, h, T_cached + T_new, d_k", "the values returned (the new cache)"),
                                  (got_out, want_out, "B, T_new, d_model", "the output")):
        compare(call, got, want, axes, what, tol, observe, sizes)


def _step_model(case, keys, call=None):
    x, ck, cv, weights, h = _step_inputs(case)
    return decoding.decode_step(x, ck, cv, weights, h, keys)


STEP_CATALOGUE = decoding.STEP_SWITCHES + decoding._STEP_ATTENTION
DECODE_STEP = Spec(_describe_step, _check_step, _step_sizes, _step_model, lambda case, got: STEP_CATALOGUE,
                   same_nested, decoding.compatible)


# --- exercise 6, part C: generate -----------------------------------------------------------------------

def _generate_inputs(case):
    prompt, dec, steps = case.args
    layers = [{"attn": {k: _np(v) for k, v in layer["attn"].weights.items()},
               **{k: _np(v) for k, v in layer.items() if k != "attn"}} for layer in dec.layers]
    return _np(prompt), layers, {k: _np(v) for k, v in dec.final.items()}, int(dec.num_heads), float(dec.eps), \
        int(steps)


def _generate_sizes(case):
    prompt, dec, steps = case.args
    b, t_p, d = _shape(prompt)
    h = int(dec.num_heads)
    return {"B": b, "T_p": t_p, "steps": int(steps), "layers": len(dec.layers), "d_model": d, "h": h, "d_k": d // h}


def _describe_generate(case):
    prompt, dec, steps = case.args
    return (f"generate(prompt, decoder, steps={steps}) with prompt {dims('B, T_p, d_model', _shape(prompt))}, a "
            f"decoder of {len(dec.layers)} block{'s' if len(dec.layers) > 1 else ''} with {dec.num_heads} "
            f"head{'s' if dec.num_heads > 1 else ''}")


def _check_generate(case, result, call):
    want = decoding.recompute(*_generate_inputs(case))  # the graded property: recomputing everything
    got = read_array(result, call)
    tol = arrays.tolerance(arrays.result_dtype(got))
    compare(call, got, want, "B, steps, d_model", "the generated vectors", tol, lambda _: None,
            _generate_sizes(case), case.check == "shape")


GENERATE_CATALOGUE = decoding.GENERATE_SWITCHES + STEP_CATALOGUE
GENERATE = Spec(_describe_generate, _check_generate, _generate_sizes,
                lambda case, keys, call=None: decoding.generate(*_generate_inputs(case), keys),
                lambda case, got: GENERATE_CATALOGUE, same_nested, decoding.compatible)


# --- exercise 7: repeat_kv and grouped_query_attention ---------------------------------------------------

def _repeat_sizes(case):
    (b, g, t, d), h = _shape(case.args[0]), int(case.args[1])
    return {"B": b, "g": g, "T": t, "d": d, "h": h}


def _check_repeat(case, result, call):
    x, h = _np(case.args[0]), int(case.args[1])
    want = _np(case.expected) if case.expected is not None else decoding.repeat_kv(x, h)
    got = read_array(result, call)
    compare(call, got, want, "B, h, T, d", "the result", arrays.tolerance(arrays.result_dtype(got)), lambda _: None,
            _repeat_sizes(case), case.check == "shape")


REPEAT_KV = Spec(lambda c: f"repeat_kv(x, num_heads={c.args[1]}) with x {dims('B, g, T, d', _shape(c.args[0]))}",
                 _check_repeat, _repeat_sizes,
                 lambda case, keys, call=None: decoding.repeat_kv(_np(case.args[0]), int(case.args[1]), keys),
                 lambda case, got: decoding.REPEAT_SWITCHES, same_nested, decoding.compatible)


def _causal(case) -> bool:
    return bool(case.args[3]) if len(case.args) > 3 else False


def _describe_gqa(case):
    q, k, v = case.args[:3]
    causal = f", causal={_causal(case)}" if len(case.args) > 3 else ""
    return (f"grouped_query_attention(q, k, v{causal}) with q {dims('B, h, T_q, d_k', _shape(q))}, k "
            f"{dims('B, g, T_k, d_k', _shape(k))}, v {dims('B, g, T_k, d_v', _shape(v))}")


def _check_gqa(case, result, call):
    want = decoding.grouped_query_attention(*_qkv(case), _causal(case))
    _pair_check(case, result, call, want, "B, h, T_q, d_v", _causal(case))


GROUPED = Spec(_describe_gqa, _check_gqa, _attention_sizes,
               lambda case, keys, call=None: decoding.grouped_query_attention(*_qkv(case), _causal(case), keys),
               lambda case, got: decoding.GQA_SWITCHES, same_nested, decoding.compatible)

SPECS_SIZES = {"causal_attention": _attention_sizes, "grouped_query_attention": _attention_sizes}
SPECS = {"causal_attention": CAUSAL_ATTENTION, "decode_step": DECODE_STEP, "generate": GENERATE,
         "repeat_kv": REPEAT_KV, "grouped_query_attention": GROUPED}
