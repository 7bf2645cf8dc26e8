"""Exercises 6 and 7 in NumPy: causal attention over the last positions, a decode step with a key/value
cache, generation with it, and grouped-query attention, each with its mistake switches.

Each function computes what the exercise's function returns with the given mistakes switched on (an
empty set: the right answer), raising where the mistake raises (a :class:`~mha_checks.variants.Failure`
with the signature torch's message has, where NumPy would fail otherwise or not at all). The judge names
a mistake only where it reproduces every call of a test (:func:`mha_checks.diagnosis.common.search`).

The alignment of the mask: the T_q queries are the *last* T_q of the T_k positions, so query i sits at
position T_k - T_q + i and sees keys 0 .. T_k - T_q + i (``np.tril(ones, T_k - T_q)``: bottom-right).
At T_q = T_k this is exercise 5's and chapter 7's mask (``tril(0)``).
"""
import functools
import math

import numpy as np

from .variants import HALF_WORDS, Failure, Switch

# --- the switches ------------------------------------------------------------------------------------

MASK_FIX = ("the queries are the last T_q of the T_k positions: query i sits at position T_k - T_q + i and "
            "sees keys 0..T_k - T_q + i, torch.ones(T_q, T_k).tril(T_k - T_q)")
ATTENTION_SWITCHES = [
    Switch("mask_top_left", "causal mask aligned top-left (query i sees keys 0..i) although the queries are the "
           "last positions", MASK_FIX + " (tril(0) is right only when T_q = T_k)"),
    Switch("mask_plus_one", "mask off by one (each query also sees the key right after it)", MASK_FIX),
    Switch("mask_minus_one", "mask off by one (a query may not see its own key)", MASK_FIX),
    Switch("no_mask", "causal mask not applied", "set the scores of the keys after each query to -inf before the "
           "softmax: " + MASK_FIX),
    Switch("mask_inverted", "mask the wrong way round (the future kept, the past hidden)", MASK_FIX),
    Switch("mask_square", "causal mask built for T_q x T_q (wrong when T_q < T_k)", "the mask is (T_q, T_k): "
           + MASK_FIX),
    Switch("mask_zero", "masked scores set to 0 instead of -inf",
           "a score of 0 still gets weight after the softmax: fill the hidden scores with float('-inf')"),
    Switch("mask_after", "mask applied after the softmax", "mask the scores (-inf) before the softmax; zeroing "
           "weights after it leaves rows that no longer sum to 1"),
    Switch("no_scale", "scores not scaled", "divide the scores by sqrt(d_k) before the softmax"),
    Switch("scale_d_k", "scores divided by d_k instead of sqrt(d_k)", "divide by math.sqrt(d_k), not d_k"),
    Switch("scale_mul", "scores multiplied by sqrt(d_k) instead of divided", "divide by math.sqrt(d_k)"),
    Switch("scale_d_v", "scores scaled by the values' width, sqrt(d_v), instead of the keys', sqrt(d_k)",
           "the scores are dot products over the d_k features of a query and a key: divide by sqrt(q.shape[-1])"),
    Switch("softmax_queries", "softmax over the wrong axis (the queries, dim=-2)",
           "each query's weights over the keys must sum to 1: softmax over the last axis, dim=-1"),
    Switch("kv_swapped", "keys and values exchanged", "scores = q @ k.transpose(-2, -1), then weights @ v"),
    Switch("weights_T", "attention weights returned transposed", "return the weights as the softmax gives them, "
           "(B, h, T_q, T_k)"),
    Switch("pair_swapped", "the pair returned in the wrong order, (weights, out)", "return (out, weights)"),
    Switch("half", *HALF_WORDS, dtype="float16"),
]
ATTENTION_KEYS = frozenset(s.key for s in ATTENTION_SWITCHES)
_MASKS = {"mask_top_left", "mask_plus_one", "mask_minus_one", "no_mask", "mask_inverted", "mask_square"}
_SCALES = {"no_scale", "scale_d_k", "scale_mul", "scale_d_v", "scale_d_model"}

STEP_FIX = "append the new keys and values after the cached ones, along the time axis: torch.cat([cache_k, k], dim=2)"
STEP_SWITCHES = [
    Switch("cache_axis_heads", "the cache concatenated along the heads axis (dim=1) instead of time", STEP_FIX),
    Switch("cache_axis_features", "the cache concatenated along the features axis (dim=-1) instead of time",
           STEP_FIX),
    Switch("cache_axis_batch", "the cache concatenated along the batch axis (dim=0) instead of time", STEP_FIX),
    Switch("cache_reprojected", "the cache concatenated before the keys and values are projected (the cached "
           "keys and values projected again)", "the cache holds keys and values already projected: project only "
           "the new positions, k = attn.k_proj(x), then append them to the cache"),
    Switch("self_twice", "the new positions' keys and values appended twice (each new token attends to itself "
           "twice)", "append the new keys and values once: the keys attended over are the cache's, new ones "
           "included"),
    Switch("cache_ignored", "the cache not attended over (the new positions attend only to each other)",
           "the new queries attend over every cached key and value, then the new ones: torch.cat([cache_k, k], "
           "dim=2)"),
    Switch("cache_read_swapped", "keys and values swapped when read from the cache",
           "the cache is the pair (keys, values), in that order: cache_k, cache_v = cache"),
    Switch("cache_returned_swapped", "keys and values swapped in the returned cache",
           "return the cache as (keys, values), in that order"),
    Switch("cache_not_updated", "the cache returned as it came (the new keys and values not appended)",
           "return the grown cache: (torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2))"),
    Switch("cache_new_only", "only the new keys and values returned as the cache", "return the grown cache: "
           "the cached keys and values, then the new ones"),
    Switch("scale_d_model", "scores scaled by sqrt(d_model) instead of sqrt(d_k)",
           "each head's scores are dot products over d_k = d_model / h features: divide by sqrt(d_k)"),
    Switch("no_out_proj", "the output projection left out", "after merging the heads, apply attn.out_proj"),
    Switch("no_bias", "the projections' biases left out", "each projection adds its bias: attn.q_proj(x), or "
           "F.linear(x, attn.q_proj.weight, attn.q_proj.bias)"),
    Switch("split_no_T", "split into heads by a reshape without transpose",
           "reshape (B, T, d_model) to (B, T, h, d_k), then swap axes 1 and 2: (B, h, T, d_k)"),
    Switch("merge_no_T", "heads merged by a reshape without transpose",
           "swap the h and T axes back ((B, T, h, d_k)) before reshaping to (B, T, d_model)"),
]
STEP_KEYS = frozenset(s.key for s in STEP_SWITCHES)
_STEP_ATTENTION = [s for s in ATTENTION_SWITCHES if s.key not in {"weights_T", "pair_swapped", "scale_d_v", "half",
                                                                 "kv_swapped"}]
_CACHE_JOIN = {"cache_axis_heads", "cache_axis_features", "cache_axis_batch", "cache_reprojected", "self_twice",
               "cache_ignored"}
_CACHE_RETURN = {"cache_returned_swapped", "cache_not_updated", "cache_new_only"}

GENERATE_SWITCHES = [
    Switch("cache_not_kept", "the cache not kept between steps (each step starts from an empty cache)",
           "make one cache per layer before the loop and pass each step the cache the previous step returned"),
    Switch("refeed_all", "the whole sequence fed again at every step, on top of the cache (positions cached "
           "twice)", "with a cache, each step after the first feeds only the newest vector, x = y[:, -1:]"),
    Switch("first_position", "the next input taken from the first position's output instead of the last",
           "the next input is the output at the last position: y[:, -1:]"),
    Switch("no_final_norm", "the decoder's final LayerNorm left out", "apply decoder.norm after the last block"),
    Switch("shared_cache", "one cache shared by every layer", "keep one cache per layer: caches[i] for "
           "decoder.layers[i]"),
    Switch("no_residual", "the residual connection left out around the attention", "x = x + attention output, "
           "then x = x + block.feed_forward(block.norm2(x))"),
    Switch("norm1_twice", "norm1 used before the feed-forward too", "the feed-forward reads block.norm2(x)"),
    Switch("post_norm", "LayerNorm applied after the residual sum (post-norm) instead of before each sub-layer",
           "pre-norm: x = x + attention(block.norm1(x)); x = x + block.feed_forward(block.norm2(x))"),
    Switch("one_more_step", "one step too many", "return exactly `steps` vectors: the first comes from the "
           "prompt, each later one from the vector before it"),
    Switch("prompt_outputs", "the prompt's outputs returned with the generated vectors",
           "return only the `steps` generated vectors, (B, steps, d_model)"),
]
GENERATE_KEYS = frozenset(s.key for s in GENERATE_SWITCHES)

GROUP_FIX = ("query head i reads key/value group i // (h // g): repeat each group h // g times in place, "
             "x.repeat_interleave(h // g, dim=1)")
REPEAT_SWITCHES = [
    Switch("tiled", "heads grouped with repeat (head i reads group i % g) instead of repeat_interleave",
           GROUP_FIX + " (x.repeat(1, h // g, 1, 1) tiles the groups: head i would read group i % g)"),
    Switch("counts_exchanged", "the group count and the head count exchanged (each group repeated g times, not "
           "h // g)", GROUP_FIX),
    Switch("repeat_by_h", "each group repeated h times instead of h // g", GROUP_FIX),
    Switch("time_axis", "repeated along the time axis (dim=2) instead of the heads (dim=1)", GROUP_FIX),
    Switch("squeeze", "axes of size 1 dropped (a stray .squeeze())", ".squeeze() drops every axis of size 1, a "
           "batch of one or a single position included: remove it"),
]
REPEAT_KEYS = frozenset(s.key for s in REPEAT_SWITCHES)
GQA_SWITCHES = [s for s in REPEAT_SWITCHES if s.key != "squeeze"] + ATTENTION_SWITCHES

# one of each group at most
EXCLUSIVE = [_MASKS | {"mask_zero"}, {"no_mask", "mask_zero", "mask_after"}, _SCALES, _CACHE_JOIN,
             _CACHE_RETURN, {"tiled", "counts_exchanged", "repeat_by_h", "time_axis"},
             {"weights_T", "pair_swapped"}, {"no_final_norm", "post_norm"}, {"no_residual", "post_norm"},
             {"one_more_step", "prompt_outputs"}, {"refeed_all", "cache_not_kept"}]


def compatible(keys) -> bool:
    return all(len(group & set(keys)) <= 1 for group in EXCLUSIVE)


# --- the pieces --------------------------------------------------------------------------------------

def allowed(t_q: int, t_k: int, m=frozenset()) -> np.ndarray | None:
    """(T_q, T_k) bool, True where a query may look (None: no mask). Right: tril(T_k - T_q)."""
    if "no_mask" in m:
        return None
    shift = 0 if "mask_top_left" in m else t_k - t_q
    shift += 1 if "mask_plus_one" in m else -1 if "mask_minus_one" in m else 0
    if "mask_square" in m:
        if t_q != t_k:  # scores (.., T_q, T_k) masked by a (T_q, T_q) mask: torch's broadcast error, tensor a
            raise Failure(("broadcast", t_q, t_k, 3))  # the mask, tensor b the scores (as exercise 5's np.where)
        return _triangle(t_q, t_k, 0, False)
    return _triangle(t_q, t_k, shift, "mask_inverted" in m)


@functools.lru_cache(maxsize=256)
def _triangle(t_q: int, t_k: int, shift: int, upper: bool) -> np.ndarray:
    """(T_q, T_k) bool: triu (``upper``) or tril of ones from diagonal ``shift``; read-only, made once per size."""
    full = np.ones((t_q, t_k), dtype=bool)
    mask = np.triu(full, shift) if upper else np.tril(full, shift)
    mask.flags.writeable = False
    return mask


def _softmax(x, axis):
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b, failing as torch's batched product does (its signature) where the shapes do not fit."""
    if a.shape[-1] != b.shape[-2]:
        raise Failure(("contract", a.shape[-1], b.shape[-2]))
    for dim, (x, y) in enumerate(zip(a.shape[:-2], b.shape[:-2])):
        if x != y and 1 not in (x, y):
            raise Failure(("broadcast", x, y, dim))  # torch's tensor a is the first operand
    return a @ b


def join(parts: list, axis: int) -> np.ndarray:
    """np.concatenate, failing as torch.cat does (its signature) where the other axes differ."""
    first = parts[0].shape
    for p in parts[1:]:
        for i, (x, y) in enumerate(zip(first, p.shape)):
            if i != axis % len(first) and x != y:
                raise Failure(("join", axis % len(first), frozenset((x, y))))  # as torch.cat reports it
    return np.concatenate(parts, axis=axis)


def attend(q, k, v, causal: bool = True, m=frozenset(), d_model: int | None = None):
    """(out (B, h, T_q, d_v), weights (B, h, T_q, T_k)): softmax(q k^T / sqrt(d_k) + mask) v."""
    if "kv_swapped" in m:
        k, v = v, k
    d_k, d_v = q.shape[-1], v.shape[-1]
    divisor = {"no_scale": 1.0, "scale_d_k": float(d_k), "scale_mul": 1 / math.sqrt(d_k), "scale_d_v": math.sqrt(d_v),
               "scale_d_model": math.sqrt(d_model or d_k)}
    scale = next((divisor[key] for key in m if key in divisor), math.sqrt(d_k))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        scores = matmul(q, np.swapaxes(k, -1, -2)) / scale
        mask = allowed(q.shape[-2], k.shape[-2], m) if causal else None
        if mask is not None and "mask_after" not in m:
            scores = np.where(mask, scores, 0.0 if "mask_zero" in m else -np.inf)
        weights = _softmax(scores, -2 if "softmax_queries" in m else -1)
        if mask is not None and "mask_after" in m:
            weights = np.where(mask, weights, 0.0)
        out = matmul(weights, v)
    weights = np.swapaxes(weights, -1, -2) if "weights_T" in m else weights
    return (weights, out) if "pair_swapped" in m else (out, weights)


def causal_attention(q, k, v, m=frozenset()):
    """Exercise 6, part A: (out, weights), the queries being the last T_q of the T_k positions."""
    if "half" in m:
        out, w = attend(*(a.astype(np.float16).astype(np.float64) for a in (q, k, v)), True, m - {"half"})
        return out.astype(np.float16).astype(np.float64), w.astype(np.float16).astype(np.float64)
    return attend(q, k, v, True, m)


# --- exercise 6, part B: one decode step --------------------------------------------------------------

def _linear(x, weights: dict, name: str, m=frozenset()):
    out = x @ weights[f"{name}_weight"].T
    return out if "no_bias" in m else out + weights[f"{name}_bias"]


def split(x, h: int, m=frozenset()):
    """(B, T, h*d_k) -> (B, h, T, d_k)."""
    b, t, d = x.shape
    if "split_no_T" in m:
        return x.reshape(b, h, t, d // h)
    return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)


def merge(x, m=frozenset()):
    """(B, h, T, d_k) -> (B, T, h*d_k)."""
    b, h, t, d_k = x.shape
    if "merge_no_T" in m:
        return x.reshape(b, t, h * d_k)
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d_k)


def decode_step(x, cache_k, cache_v, weights: dict, h: int, m=frozenset()):
    """Exercise 6, part B: (out (B, T_new, d_model), (keys, values) (B, h, T_cached + T_new, d_k))."""
    d_model = x.shape[-1]
    if "cache_read_swapped" in m:
        cache_k, cache_v = cache_v, cache_k
    q = split(_linear(x, weights, "q_proj", m), h, m)                         # (B, h, T_new, d_k)
    k = split(_linear(x, weights, "k_proj", m), h, m)
    v = split(_linear(x, weights, "v_proj", m), h, m)
    if "cache_reprojected" in m:  # the cached keys merged back to (B, T, d_model), joined to x, projected again
        k = split(_linear(join([merge(cache_k), x], 1), weights, "k_proj", m), h, m)
        v = split(_linear(join([merge(cache_v), x], 1), weights, "v_proj", m), h, m)
        keys, values = k, v
    else:
        axis = 1 if "cache_axis_heads" in m else 3 if "cache_axis_features" in m else 0 \
            if "cache_axis_batch" in m else 2
        keys, values = join([cache_k, k], axis), join([cache_v, v], axis)
    seen_k, seen_v = keys, values
    if "self_twice" in m:
        seen_k, seen_v = join([keys, k], 2), join([values, v], 2)
    if "cache_ignored" in m:
        seen_k, seen_v = k, v
    heads, _ = attend(q, seen_k, seen_v, True, m & (ATTENTION_KEYS | {"scale_d_model"}), d_model)
    concat = merge(heads, m)
    out = concat if "no_out_proj" in m else _linear(concat, weights, "out_proj", m)
    if "cache_returned_swapped" in m:
        keys, values = values, keys
    if "cache_not_updated" in m:
        keys, values = cache_k, cache_v
    if "cache_new_only" in m:
        keys, values = k, v
    return out, (keys, values)


# --- exercise 6, part C: generation ----------------------------------------------------------------

def layer_norm(x, weight, bias, eps: float):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def feed_forward(x, layer: dict):
    hidden = np.maximum(x @ layer["linear1_weight"].T + layer["linear1_bias"], 0.0)
    return hidden @ layer["linear2_weight"].T + layer["linear2_bias"]


def block(x, cache: tuple, layer: dict, h: int, eps: float, m=frozenset()):
    """One pre-norm block with its cache: (x after the block, the block's new cache)."""
    def norm(t, which):
        return layer_norm(t, layer[f"{which}_weight"], layer[f"{which}_bias"], eps)
    if "post_norm" in m:
        a, cache = decode_step(x, *cache, layer["attn"], h, m & STEP_KEYS | m & ATTENTION_KEYS)
        x = norm(x + a, "norm1")
        return norm(x + feed_forward(x, layer), "norm2"), cache
    a, cache = decode_step(norm(x, "norm1"), *cache, layer["attn"], h, m & STEP_KEYS | m & ATTENTION_KEYS)
    x = a if "no_residual" in m else x + a
    return x + feed_forward(norm(x, "norm1" if "norm1_twice" in m else "norm2"), layer), cache


def generate(prompt, layers: list, final: dict, h: int, eps: float, steps: int, m=frozenset()):
    """Exercise 6, part C: the ``steps`` vectors generated after ``prompt`` (B, steps, d_model), each the
    decoder's output at the last position, fed back as the next input; one cache per layer."""
    b, _, d = prompt.shape
    empty = np.zeros((b, h, 0, d // h))

    def fresh():
        return [(empty, empty) for _ in layers]
    caches, x, outputs, fed = fresh(), prompt, [], prompt
    for _ in range(steps + ("one_more_step" in m)):
        if "cache_not_kept" in m:
            caches = fresh()
        shared = caches[0]
        for i, layer in enumerate(layers):
            x, new = block(x, shared if "shared_cache" in m else caches[i], layer, h, eps, m)
            if "shared_cache" in m:
                shared = new
            caches[i] = new
        if "shared_cache" in m:
            caches[0] = shared
        y = x if "no_final_norm" in m else layer_norm(x, final["weight"], final["bias"], eps)
        if "prompt_outputs" in m and not outputs:
            outputs.append(y[:, :-1])
        nxt = y[:, :1] if "first_position" in m else y[:, -1:]
        outputs.append(nxt)
        fed = join([fed, nxt], 1)
        x = fed if "refeed_all" in m else nxt
    return np.concatenate(outputs, axis=1)


def recompute(prompt, layers: list, final: dict, h: int, eps: float, steps: int):
    """Generation without a cache: every step runs the whole sequence so far (what ``generate`` must equal)."""
    b, _, d = prompt.shape
    seq = prompt
    for _ in range(steps):
        x = seq
        for layer in layers:
            empty = np.zeros((b, h, 0, d // h))
            x, _ = block(x, (empty, empty), layer, h, eps)
        seq = np.concatenate([seq, layer_norm(x, final["weight"], final["bias"], eps)[:, -1:]], axis=1)
    return seq[:, prompt.shape[1]:]


# --- exercise 7: grouped-query attention ----------------------------------------------------------------

def repeat_kv(x, num_heads: int, m=frozenset()):
    """(B, g, T, d) -> (B, h, T, d): head i reads group i // (h // g)."""
    g = x.shape[1]
    r = num_heads // g
    if "tiled" in m:
        out = np.tile(x, (1, r, 1, 1))
    elif "counts_exchanged" in m:
        out = np.repeat(x, g, axis=1)
    elif "repeat_by_h" in m:
        out = np.repeat(x, num_heads, axis=1)
    elif "time_axis" in m:
        out = np.repeat(x, r, axis=2)
    else:
        out = np.repeat(x, r, axis=1)
    if "half" in m:
        out = out.astype(np.float16).astype(np.float64)
    return np.squeeze(out) if "squeeze" in m else out


def grouped_query_attention(q, k, v, causal: bool = False, m=frozenset()):
    """(out (B, h, T_q, d_v), weights (B, h, T_q, T_k)) with g key/value groups for h query heads."""
    h = q.shape[1]
    if "half" in m:
        q, k, v = (a.astype(np.float16).astype(np.float64) for a in (q, k, v))
    keys, values = repeat_kv(k, h, m & REPEAT_KEYS), repeat_kv(v, h, m & REPEAT_KEYS)
    out, w = attend(q, keys, values, causal, m & ATTENTION_KEYS - {"half"})
    if "half" in m:
        return tuple(a.astype(np.float16).astype(np.float64) for a in (out, w))
    return out, w

