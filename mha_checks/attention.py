"""Exercise 5 in NumPy: the reference multi-head attention with mistake switches, stage by stage,
and the analyses that localise where a student's (out, weights) first departs from it.

Stages, in order: projection, split, scores, scale, mask, softmax, weights x V, merge, W^O.
The weights returned by the student show everything up to the softmax; the output shows the rest.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from .calling import NOT_A_MODULE
from .variants import HALF_WORDS, Failure, Switch

STAGES = ("projection", "split", "scores", "scale", "mask", "softmax", "weights x V", "merge", "W^O")


@dataclass(frozen=True)
class Inputs:
    """One case of exercise 5, as float64 NumPy arrays (torch's layout for the weights)."""
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    weights: dict
    num_heads: int
    causal: bool
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # see _projected

    @property
    def sizes(self) -> dict:
        b, t_q, d = self.query.shape
        return {"B": b, "T_q": t_q, "T_k": self.key.shape[1], "d_model": d, "h": self.num_heads,
                "d_k": d // self.num_heads}


SWITCHES = [
    Switch("no_in_bias", "the input-projection biases were left out",
           "mha.in_proj_bias holds b_q, b_k, b_v (d_model entries each): add each after its projection"),
    Switch("in_not_T", "weights not transposed (torch.nn.Linear stores (d_out, d_in))",
           "torch keeps each projection as (d_out, d_in): project with x @ W.T + b, or F.linear(x, W, b)"),
    Switch("qk_swapped", "queries and keys projected with each other's weights",
           "mha.in_proj_weight stacks W_q, W_k, W_v in that order (rows 0:d, d:2d, 2d:3d)"),
    Switch("qv_swapped", "queries and values projected with each other's weights",
           "mha.in_proj_weight stacks W_q, W_k, W_v in that order (rows 0:d, d:2d, 2d:3d)"),
    Switch("kv_from_query", "keys and values computed from the query (right for self-attention only)",
           "project key with W_k and value with W_v: in cross-attention they differ from query, and T_k != T_q"),
    Switch("v_from_key", "values computed from the key instead of the value",
           "project value (the third argument) with W_v"),
    Switch("v_with_k_weights", "values projected with the key's weights (W_k, b_k) instead of W_v, b_v",
           "project value with rows 2d:3d of mha.in_proj_weight and mha.in_proj_bias (W_v, b_v)"),
    Switch("v_with_out_weights", "values projected with the output projection's weights (mha.out_proj) "
           "instead of W_v, b_v", "project value with rows 2d:3d of mha.in_proj_weight and mha.in_proj_bias "
           "(W_v, b_v); mha.out_proj comes last, after the heads are merged"),
    Switch("k_from_value", "keys computed from the value instead of the key",
           "project key (the second argument) with W_k"),
    Switch("no_q_bias", "the query bias b_q was left out",
           "add b_q (mha.in_proj_bias[:d_model]) after the query projection"),
    Switch("no_v_bias", "the value bias b_v was left out",
           "add b_v (mha.in_proj_bias[2*d_model:]) after the value projection"),
    Switch("v_not_T", "W_v not transposed (torch.nn.Linear stores (d_out, d_in))",
           "project the values with value @ W_v.T + b_v, or F.linear(value, W_v, b_v)"),
    Switch("split_no_T", "split into heads by a reshape without transpose",
           "reshape (B, T, d_model) to (B, T, h, d_k), then swap axes 1 and 2: (B, h, T, d_k)"),
    Switch("no_split", "attention computed over all d_model features at once (no split into heads)",
           "split q, k and v into h heads of d_k features ((B, T, h, d_k), then swap axes 1 and 2) and return "
           "the weights of every head, (B, h, T_q, T_k)"),
    Switch("split_strided", "heads interleaved in the split (feature j sent to head j % h)",
           "head i owns features i*d_k:(i+1)*d_k: reshape to (B, T, h, d_k), not (B, T, d_k, h)"),
    Switch("scale_d_model", "scaled by sqrt(d_model) instead of sqrt(d_k)",
           "each head's scores are q.k over d_k = d_model/h features: divide by sqrt(d_k), the head width"),
    Switch("no_scale", "scores not scaled", "divide the scores by sqrt(d_k) before the softmax"),
    Switch("scale_d_k", "scores divided by d_k instead of sqrt(d_k)", "divide by math.sqrt(d_k), not d_k"),
    Switch("scale_mul", "scores multiplied by sqrt(d_k) instead of divided",
           "divide the scores by sqrt(d_k): q @ k.transpose(-2, -1) / math.sqrt(d_k)"),
    Switch("no_mask", "causal mask not applied", "with causal=True, set the scores of keys after the query "
           "to -inf before the softmax: scores.masked_fill(~torch.ones(T_q, T_k).tril().bool(), -inf)"),
    Switch("mask_always", "causal mask applied although causal=False", "mask only when causal is True"),
    Switch("mask_inverted", "mask the wrong way round (the future kept, the past hidden)",
           "query i may attend to keys 0..i: keep the lower triangle (torch.tril), hide the upper one"),
    Switch("mask_strict", "mask hides the diagonal (a query may not see its own key)",
           "query i may attend to keys 0..i, itself included: torch.ones(T_q, T_k).tril(), not tril(-1)"),
    Switch("mask_square", "causal mask built for T_q x T_q (wrong when T_q != T_k)",
           "the mask is (T_q, T_k): query i sees keys 0..i, torch.ones(T_q, T_k).tril()"),
    Switch("mask_transposed", "causal mask built (T_k, T_q), the sizes exchanged",
           "the mask is (T_q, T_k), a row per query: torch.ones(T_q, T_k).tril()"),
    Switch("mask_plus_one", "mask off by one (each query also sees the key right after it)",
           "query i may attend to keys 0..i: torch.ones(T_q, T_k).tril(), not tril(1)"),
    Switch("mask_bottom_right", "causal mask aligned to the last key (bottom-right) instead of the first",
           "query i may attend to keys 0..i (the first key aligned with the first query): torch.ones(T_q, T_k).tril(), "
           "not tril(T_k - T_q)"),
    Switch("mask_zero", "masked scores set to 0 instead of -inf",
           "a score of 0 still gets weight after the softmax: fill the hidden scores with float('-inf')"),
    Switch("mask_after", "mask applied after the softmax",
           "mask the scores (-inf where a query may not look) before the softmax; zeroing weights after it "
           "leaves rows that no longer sum to 1"),
    Switch("softmax_queries", "softmax over the wrong axis (the queries, dim=-2)",
           "each query's weights over the keys must sum to 1: softmax over the last axis, dim=-1"),
    Switch("softmax_heads", "softmax over the wrong axis (the heads, dim=1)",
           "each query's weights over the keys must sum to 1: softmax over the last axis, dim=-1"),
    Switch("merge_no_T", "heads merged by a reshape without transpose",
           "swap the h and T axes back ((B, T, h, d_k)) before reshaping to (B, T, d_model)"),
    Switch("merge_order", "heads merged in the wrong axis order",
           "swap the h and T axes back ((B, T, h, d_k)) before reshaping to (B, T, d_model)"),
    Switch("heads_reversed", "heads concatenated in reverse order",
           "head 0 comes first: merge with weights @ v as it is, (B, h, T_q, d_k) -> (B, T_q, h, d_k)"),
    Switch("heads_averaged", "heads averaged instead of concatenated",
           "Concat(head_1, ..., head_h) keeps every head: (B, T, h*d_k) = (B, T, d_model) before W^O"),
    Switch("no_w_o", "W^O was forgotten", "after concatenating the heads, apply the output projection: "
           "F.linear(concat, mha.out_proj.weight, mha.out_proj.bias)"),
    Switch("no_out_bias", "the output bias was left out",
           "mha.out_proj.bias is part of W^O: add it after the output projection"),
    Switch("out_not_T", "W^O not transposed (torch.nn.Linear stores (d_out, d_in))",
           "project with concat @ mha.out_proj.weight.T + mha.out_proj.bias, or F.linear"),
    Switch("weights_averaged", "attention weights averaged over heads",
           "return the weights of every head: (B, h, T_q, T_k)"),
    Switch("weights_are_scores", "the scores returned instead of the weights",
           "return the softmax of the scores (each row sums to 1), not the scores"),
    Switch("bias_interleaved", "the input biases split along the wrong axis (b_q = in_proj_bias[0::3], ...)",
           "mha.in_proj_bias is b_q, b_k, b_v one after the other (d_model entries each): "
           "mha.in_proj_bias.chunk(3), not a (d_model, 3) reshape"),
    Switch("scores_transposed", "scores computed as K Q^T instead of Q K^T",
           "one row per query: scores = q @ k.transpose(-2, -1), (B, h, T_q, T_k)"),
    Switch("scale_zero", "scores multiplied by 1 // sqrt(d_k), which is 0, so every allowed key gets the same weight",
           "1 // math.sqrt(d_k) is floor division: 0 (1 only when d_k = 1); divide by math.sqrt(d_k)"),
    Switch("values_by_scores", "values weighted by the scores instead of the weights",
           "multiply v by the softmax's output: weights @ v, not scores @ v"),
    Switch("out_bias_each", "the output bias added once per head",
           "mha.out_proj.bias belongs to the whole layer: add it once, after W^O"),
    # --- mistakes seen in practice (issue 27) ----------------------------------------------------------
    Switch("k_not_T", "keys not transposed in q @ k^T (the transpose left out, perhaps done twice)",
           "scores = q @ k.transpose(-2, -1): (B, h, T_q, d_k) @ (B, h, d_k, T_k)"),
    Switch("keys_len_t_q", "keys reshaped with the query's length",
           "the key (and value) hold T_k positions, not T_q: reshape each with its own length (key.shape[1], or -1)"),
    Switch("assert_square", "an assert that the mask is square (T_q = T_k)",
           "a causal mask need not be square: assert nothing that holds only when T_q = T_k"),
    Switch("merge_view", "view() of a transposed tensor",
           "(weights @ v).transpose(1, 2) is not contiguous, and .view() cannot reshape it: use .reshape(B, T_q, "
           "d_model), or .contiguous().view(...)"),
    Switch("merge_bh", "heads merged with B and h exchanged (the (B*h) axis unflattened as (h, B))",
           "a (B*h, ...) axis made from (B, h, ...) unflattens as (B, h): .view(B, h, T_q, d_k), then the merge"),
    Switch("weights_bh", "weights returned with B and h exchanged (the (B*h) axis unflattened as (h, B))",
           "a (B*h, T_q, T_k) axis made from (B, h, ...) unflattens as (B, h): weights.view(B, h, T_q, T_k)"),
    Switch("softmax_max_queries", "softmax stabilised with the maximum over the queries (dim=-2)",
           "subtract each row's own maximum, over the keys: scores - scores.amax(dim=-1, keepdim=True) "
           "(torch.softmax(scores, dim=-1) does it for you)"),
    Switch("softmax_max_heads", "softmax stabilised with the maximum over the heads (dim=1)",
           "subtract each row's own maximum, over the keys: scores - scores.amax(dim=-1, keepdim=True) "
           "(torch.softmax(scores, dim=-1) does it for you)"),
    Switch("softmax_batch", "softmax over the wrong axis (the batch, dim=0)",
           "each query's weights over the keys must sum to 1: softmax over the last axis, dim=-1"),
    Switch("softmax_whole", "softmax over the whole (T_q, T_k) matrix of each head at once",
           "each query's row is its own distribution: torch.softmax(scores, dim=-1), not over T_q*T_k"),
    Switch("weights_T", "attention weights returned transposed",
           "return weights as the softmax gives them, (B, h, T_q, T_k) (no .transpose)"),
    Switch("weights_flat", "attention weights returned with the heads flattened into the batch",
           "return them as (B, h, T_q, T_k), e.g. weights.view(B, h, T_q, T_k)"),
    Switch("squeeze_out", "the output's axes of size 1 dropped (a stray .squeeze())",
           ".squeeze() drops every axis of size 1, a batch of one or a single query included: remove it"),
    Switch("squeeze_weights", "the weights' axes of size 1 dropped (a stray .squeeze())",
           ".squeeze() drops every axis of size 1, a batch of one, a single head or query included: remove it"),
    *[Switch(("scale", name), f"scores divided by {name} instead of sqrt(d_k)",
             "divide q @ k.transpose(-2, -1) by math.sqrt(d_k), d_k = d_model // h")
      for name in ("d_model", "sqrt(h)", "h", "sqrt(T_q)", "sqrt(T_k)")],
    *[Switch(("heads", first, last), "heads left out",
             f"loop over every head, range(h), not range({first}, {'h' if not last else f'h - {last}'})")
      for first, last in ((1, 0), (0, 1), (1, 1))],
    Switch("pair_swapped", "the pair returned in the wrong order, (weights, out)", "return (out, weights)"),
    Switch("module_called", "the module called, mha(query, key, value): a ready-made answer, and here mha holds "
           "only the weights", "compute the attention yourself from mha.in_proj_weight, mha.in_proj_bias, "
           "mha.out_proj.weight and mha.out_proj.bias"),
    Switch("mask_kept", "causal mask kept from an earlier call (built once, for that call's T_q x T_k)",
           "build the mask in every call from its own sizes, torch.ones(T_q, T_k).tril(): a mask kept in a global, "
           "a default argument or an attribute keeps the first call's sizes"),
    # torch's 16-bit kernels round differently from NumPy's: a 16-bit computation is held to float16's tolerance
    Switch("half", *HALF_WORDS, dtype="float16"),
]
BY_KEY = {s.key: s for s in SWITCHES}
STAGE_OF = {"k_from_value": 0, "v_with_k_weights": 0, "no_q_bias": 0, "no_v_bias": 0, "v_not_T": 0, "heads_reversed": 7,
            "no_split": 1, "no_in_bias": 0, "in_not_T": 0, "qk_swapped": 0, "qv_swapped": 0, "kv_from_query": 0, "v_from_key": 0,
            "split_no_T": 1, "split_strided": 1, "scale_d_model": 3, "no_scale": 3, "scale_d_k": 3,
            "scale_mul": 3, "no_mask": 4, "mask_always": 4, "mask_inverted": 4, "mask_strict": 4,
            "mask_square": 4, "mask_transposed": 4, "mask_bottom_right": 4, "mask_plus_one": 4, "mask_zero": 4, "mask_after": 5, "softmax_queries": 5, "softmax_heads": 5,
            "merge_no_T": 7, "merge_order": 7, "heads_averaged": 7, "no_w_o": 8, "no_out_bias": 8,
            "out_not_T": 8, "weights_averaged": 5, "weights_are_scores": 5,
            "bias_interleaved": 0, "scores_transposed": 2, "scale_zero": 3, "values_by_scores": 6, "out_bias_each": 8,
            "k_not_T": 2, "keys_len_t_q": 0, "assert_square": 4, "merge_view": 7, "merge_bh": 7, "weights_bh": 5,
            "softmax_max_queries": 5, "softmax_max_heads": 5, "softmax_batch": 5, "softmax_whole": 5,
            "weights_T": 5, "weights_flat": 5, "squeeze_out": 8, "squeeze_weights": 5, "half": 8, "pair_swapped": 8, "mask_kept": 4,
            "module_called": 8, "v_with_out_weights": 0,
            **{s.key: 3 for s in SWITCHES if isinstance(s.key, tuple) and s.key[0] == "scale"},
            **{s.key: 7 for s in SWITCHES if isinstance(s.key, tuple) and s.key[0] == "heads"}}
PROJECTION_SWITCHES = frozenset(key for key, stage in STAGE_OF.items() if stage <= 2)  # all that projections reads
_SCALES = {s.key for s in SWITCHES if isinstance(s.key, tuple) and s.key[0] == "scale"}
_HEADS = {s.key for s in SWITCHES if isinstance(s.key, tuple) and s.key[0] == "heads"}
_RETURNED = {"weights_averaged", "weights_are_scores", "weights_T", "weights_flat", "weights_bh", "squeeze_weights"}
# pairs that cannot both be on (one replaces the other)
EXCLUSIVE = [{"scale_d_model", "no_scale", "scale_d_k", "scale_mul", "scale_zero", *_SCALES},
             {"no_mask", "mask_inverted", "mask_strict", "mask_square", "mask_transposed", "mask_bottom_right",
              "mask_plus_one", "mask_kept"},
             {"no_mask", "mask_zero", "mask_after"},
             {"softmax_queries", "softmax_heads", "softmax_batch", "softmax_whole", "softmax_max_queries",
              "softmax_max_heads"}, _RETURNED, {"no_split", *_RETURNED},
             {"merge_no_T", "merge_order", "heads_averaged", "heads_reversed", "merge_view", "merge_bh", *_HEADS},
             {"no_w_o", "no_out_bias", "out_not_T"}, {"no_w_o", "no_out_bias", "out_bias_each"},
             {"kv_from_query", "v_from_key", "k_from_value", "keys_len_t_q"},
             {"no_in_bias", "no_q_bias", "no_v_bias", "bias_interleaved"}, {"in_not_T", "v_not_T"},
             {"v_with_k_weights", "v_with_out_weights", "qv_swapped"}, {"split_no_T", "split_strided", "no_split"},
             {"qk_swapped", "qv_swapped"}, {"k_not_T", "scores_transposed"}]


def compatible(keys) -> bool:
    return all(len(group & set(keys)) <= 1 for group in EXCLUSIVE)


def _softmax(x, axis):
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def projections(inp: Inputs, m=frozenset()):
    """q, k, v (B, h, T, d_k) and the raw scores q k^T (B, h, T_q, T_k)."""
    d, h = inp.query.shape[-1], inp.num_heads
    d_k = d // h
    w_q, w_k, w_v = np.split(inp.weights["in_proj_weight"], 3)
    b_q, b_k, b_v = np.split(inp.weights["in_proj_bias"], 3)
    if "bias_interleaved" in m:
        b_q, b_k, b_v = inp.weights["in_proj_bias"].reshape(d, 3).T     # (3d,) -> (d, 3) -> 3 x (d,)
    if "qk_swapped" in m:
        w_q, w_k, b_q, b_k = w_k, w_q, b_k, b_q
    if "qv_swapped" in m:
        w_q, w_v, b_q, b_v = w_v, w_q, b_v, b_q
    if "no_in_bias" in m:
        b_q = b_k = b_v = 0.0
    b_q = 0.0 if "no_q_bias" in m else b_q
    b_v = 0.0 if "no_v_bias" in m else b_v
    query, key, value = inp.query, inp.key, inp.value
    if "kv_from_query" in m:
        key = value = query
    if "v_from_key" in m:
        value = key
    if "k_from_value" in m:
        key = value
    if "v_with_k_weights" in m:
        w_v, b_v = w_k, b_k
    if "v_with_out_weights" in m:
        w_v, b_v = inp.weights["out_proj_weight"], inp.weights["out_proj_bias"]

    def lin(x, w, b):
        return x @ (w if "in_not_T" in m else w.T) + b

    def split(x):
        n, t, _ = x.shape
        if "keys_len_t_q" in m and t != inp.query.shape[1]:  # reshaped with the query's length: it cannot be
            raise Failure(("reshape", x.size, (n, inp.query.shape[1], h, d_k)))
        if "no_split" in m:
            return x[:, None]                                     # (B, 1, T, d_model)
        if "split_no_T" in m:
            return x.reshape(n, h, t, d_k)
        if "split_strided" in m:
            return x.reshape(n, t, d_k, h).transpose(0, 3, 1, 2)
        return x.reshape(n, t, h, d_k).transpose(0, 2, 1, 3)

    v_lin = (value @ w_v + b_v) if "v_not_T" in m else lin(value, w_v, b_v)
    q, k, v = split(lin(query, w_q, b_q)), split(lin(key, w_k, b_k)), split(v_lin)
    if "k_not_T" in m:
        return q, k, v, q @ k                                     # raises unless T_k = d_k
    return q, k, v, (k @ q.swapaxes(-1, -2) if "scores_transposed" in m else q @ k.swapaxes(-1, -2))


def divisor(inp: Inputs, m=frozenset()) -> float:
    d, d_k = inp.query.shape[-1], inp.query.shape[-1] // inp.num_heads
    for key, value in (("scale_d_model", math.sqrt(d)), ("no_scale", 1.0), ("scale_d_k", float(d_k)),
                       ("scale_mul", 1 / math.sqrt(d_k)), ("scale_zero", 1.0 if d_k == 1 else math.inf)):
        if key in m:
            return value
    for key in m:
        if isinstance(key, tuple) and key[0] == "scale":
            return SCALES[key[1]](inp.sizes)
        if isinstance(key, tuple) and key[0] == "scale by":
            return key[1]
    return math.sqrt(d_k)


def scaled_by(s: float) -> Switch:
    """Scores divided by a constant fitted on one call (named only if it holds on every call)."""
    return Switch(("scale by", s), f"scores divided by {s:.6g} instead of sqrt(d_k)",
                  "divide q @ k.transpose(-2, -1) by math.sqrt(d_k), d_k = d_model // h, computed for each call "
                  "(not a number typed in)")


def dropped(p: float) -> Switch:
    """Dropout with rate p on the weights: the zeros are those of the student's own weights."""
    return Switch(("dropout", p), "dropout applied to the weights",
                  f"some weights are 0 and the others are scaled by 1/(1-p), dropout with p = {p:.2g} (F.dropout drops "
                  "even outside training unless training=False): attention here has no dropout, remove it")


def allowed_mask(inp: Inputs, m=frozenset()):
    """Boolean (T_q, T_k), True where a query may look, or None for no mask."""
    t_q, t_k = inp.query.shape[1], inp.key.shape[1]  # the key's length, whatever the keys were computed from
    if not (inp.causal or "mask_always" in m) or "no_mask" in m:
        return None
    kept = next((key for key in m if isinstance(key, tuple) and key[0] == "mask of"), None)
    if kept is not None:  # the mask of an earlier call: its own (T_q, T_k)
        return np.tril(np.ones(kept[1:], dtype=bool))
    if "mask_inverted" in m:
        return np.triu(np.ones((t_q, t_k), dtype=bool))
    if "mask_strict" in m:
        return np.tril(np.ones((t_q, t_k), dtype=bool), -1)
    if "mask_square" in m:
        return np.tril(np.ones((t_q, t_q), dtype=bool))
    if "mask_transposed" in m:
        return np.tril(np.ones((t_k, t_q), dtype=bool))
    if "mask_plus_one" in m:
        return np.tril(np.ones((t_q, t_k), dtype=bool), 1)
    if "mask_bottom_right" in m:
        return np.tril(np.ones((t_q, t_k), dtype=bool), t_k - t_q)
    return np.tril(np.ones((t_q, t_k), dtype=bool))


def forward(inp: Inputs, m=frozenset(), kept=None):
    """(out (B, T_q, d_model), weights (B, h, T_q, T_k)) with the mistakes ``m`` switched on (a mistake
    may make NaN or inf: that is its result, not a warning). ``kept``: the weights a dropout kept (with a
    ("dropout", p) switch)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return _forward(inp, m, kept)


def _projected(inp: Inputs, m):
    """projections(inp, m), computed once per set of the switches it reads: a diagnosis tries hundreds of
    combinations of mistakes on one case, most of them alike up to the scores."""
    key = frozenset(m) & PROJECTION_SWITCHES
    if key not in inp.memo:
        inp.memo[key] = projections(inp, key)
    return inp.memo[key]


def _weights(scores, m):
    """The softmax, over the axis the switches say (and stabilised by the maximum over the axis they say)."""
    if "softmax_whole" in m:
        flat = scores.reshape(*scores.shape[:-2], -1)
        return _softmax(flat, -1).reshape(scores.shape)
    axis = -2 if "softmax_queries" in m else -3 if "softmax_heads" in m else 0 if "softmax_batch" in m else -1
    shift = -2 if "softmax_max_queries" in m else -3 if "softmax_max_heads" in m else axis
    e = np.exp(scores - np.max(scores, axis=shift, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _forward(inp: Inputs, m, kept=None):
    sizes = inp.sizes
    if "module_called" in m:  # the grader's mha computes nothing: the call fails as it does (calling.py)
        raise TypeError(NOT_A_MODULE)
    if "assert_square" in m and inp.causal and sizes["T_q"] != sizes["T_k"]:
        raise Failure(("assert", ""))
    q, k, v, raw = _projected(inp, m)
    scores = raw / divisor(inp, m)
    allowed = allowed_mask(inp, m)  # broadcast against the scores, as torch's masked_fill does
    if allowed is not None and "mask_after" not in m:
        scores = np.where(allowed, scores, 0.0 if "mask_zero" in m else -np.inf)
    weights = _weights(scores, m)
    if allowed is not None and "mask_after" in m:
        weights = np.where(allowed, weights, 0.0)
    p = next((key[1] for key in m if isinstance(key, tuple) and key[0] == "dropout"), None)
    if p is not None:
        weights = np.where(kept, weights / (1 - p), 0.0)
    heads = (scores if "values_by_scores" in m else weights) @ v  # (B, h, T_q, d_k)
    n, h, _, d_k = heads.shape
    t_q = sizes["T_q"]  # merged with the query's length (a mask of another size may have broadcast the rows:
    # then the reshape fails, as the reference's .reshape(B, T_q, d_model) does)
    first, last = next(((key[1], key[2]) for key in m if isinstance(key, tuple) and key[0] == "heads"), (0, 0))
    if first or last:
        if h - last <= first:
            raise Failure(("nothing to join",))
        weights, heads = weights[:, first:h - last], heads[:, first:h - last]
    width = heads.shape[1] * d_k  # the heads kept, side by side
    if "no_split" in m:
        weights, concat = weights[:, 0], heads[:, 0]
    elif "merge_view" in m and h > 1 and t_q > 1:
        raise Failure(("view of a transposed tensor",))
    elif "heads_reversed" in m:
        concat = heads[:, ::-1].transpose(0, 2, 1, 3).reshape(n, t_q, width)
    elif "heads_averaged" in m:
        concat = heads.mean(1)
    elif "merge_order" in m:
        concat = heads.transpose(0, 2, 3, 1).reshape(n, t_q, width)
    elif "merge_no_T" in m:
        concat = heads.reshape(n, t_q, width)
    elif "merge_bh" in m:  # the (B, h) memory read as (h, B)
        concat = heads.reshape(heads.shape[1], n, t_q, d_k).transpose(1, 2, 0, 3).reshape(n, t_q, width)
    else:
        concat = heads.transpose(0, 2, 1, 3).reshape(n, t_q, width)
    w_o, b_o = inp.weights["out_proj_weight"], inp.weights["out_proj_bias"]
    if "no_w_o" in m:
        out = concat
    else:
        out = concat @ (w_o if "out_not_T" in m else w_o.T)
        out = out if "no_out_bias" in m else out + (h * b_o if "out_bias_each" in m else b_o)
    out, weights = (np.squeeze(out) if "squeeze_out" in m else out), _returned(weights, scores, m)
    return (weights, out) if "pair_swapped" in m else (out, weights)


def _returned(weights, scores, m):
    """The weights as the function returns them."""
    if "weights_averaged" in m:
        weights = weights.mean(1)
    if "weights_are_scores" in m:
        weights = scores
    if "weights_T" in m:
        weights = weights.swapaxes(-1, -2)
    if "weights_flat" in m:
        weights = weights.reshape(-1, *weights.shape[-2:])
    if "weights_bh" in m:  # the (B, h) memory read as (h, B), then put back as (B, h)
        b, h = weights.shape[:2]
        weights = weights.reshape(h, b, *weights.shape[2:]).transpose(1, 0, 2, 3)
    return np.squeeze(weights) if "squeeze_weights" in m else weights


# --- localisation when no variant explains the answer ---------------------------------------------

SCALES = {"sqrt(d_model)": lambda s: math.sqrt(s["d_model"]), "d_k": lambda s: s["d_k"],
          "1 (not scaled)": lambda s: 1.0, "d_model": lambda s: s["d_model"], "sqrt(h)": lambda s: math.sqrt(s["h"]),
          "1/sqrt(d_k) (multiplied instead of divided)": lambda s: 1 / math.sqrt(s["d_k"]),
          "h": lambda s: s["h"], "sqrt(T_q)": lambda s: math.sqrt(s["T_q"]),
          "sqrt(T_k)": lambda s: math.sqrt(s["T_k"])}


def fit_scale_per_head(weights: np.ndarray, inp: Inputs) -> list[float] | None:
    """One divisor per head, when each head's weights fit their own scale (and not one common scale)."""
    if weights.ndim != 4 or weights.shape[1] != inp.num_heads:
        return None
    *_, raw = projections(inp)
    found = []
    for i in range(inp.num_heads):
        s = _fit(weights[:, i:i + 1], raw[:, i:i + 1], inp)
        if s is None:
            return None
        found.append(s)
    return found


def fit_scale(weights: np.ndarray, inp: Inputs, m=frozenset()) -> float | None:
    """The divisor s such that log(weights) = raw scores / s + a constant per row, when one fits.

    Only the entries the right mask allows take part; None when the fit leaves a residual (the
    scores themselves differ, not only their scale).
    """
    *_, raw = projections(inp, m)
    return _fit(weights, raw, inp)


def _fit(weights: np.ndarray, raw: np.ndarray, inp: Inputs) -> float | None:
    if weights.shape != raw.shape or not np.isfinite(weights).all() or (weights < 0).any():
        return None
    allowed = allowed_mask(inp)
    use = np.ones(raw.shape, dtype=bool) if allowed is None else np.broadcast_to(allowed, raw.shape)
    use = use & (weights > 1e-300)
    use = use & (use.sum(axis=-1, keepdims=True) >= 2)  # a row with one key says nothing of the scale
    if not use.any():
        return None
    with np.errstate(divide="ignore"):
        logw = np.where(use, np.log(np.where(use, weights, 1.0)), 0.0)
    count = np.maximum(use.sum(axis=-1, keepdims=True), 1)
    lc = np.where(use, logw - logw.sum(-1, keepdims=True) / count, 0.0)
    rc = np.where(use, raw - np.where(use, raw, 0.0).sum(-1, keepdims=True) / count, 0.0)
    denom = float((rc * rc).sum())
    if denom == 0.0:
        return None
    a = float((lc * rc).sum()) / denom
    residual = float(np.sqrt(((lc - a * rc) ** 2).sum() / max((lc ** 2).sum(), 1e-300)))
    if residual > 1e-3 or abs(a) < 1e-12:
        return None
    return 1.0 / a


def weights_with_divisors(inp: Inputs, divisors) -> np.ndarray:
    """The right weights, with each head's scores divided by its own divisor (B, h, T_q, T_k)."""
    *_, raw = projections(inp)
    scores = raw / np.asarray(divisors, dtype=np.float64).reshape(1, -1, 1, 1)
    allowed = allowed_mask(inp)
    with np.errstate(invalid="ignore", over="ignore"):
        return _softmax(scores if allowed is None else np.where(allowed, scores, -np.inf), -1)


def mask_story(weights: np.ndarray, inp: Inputs, tol: float) -> tuple[str, str] | None:
    """(what the zeros of the weights show, the fix) when they are not where the mask puts them. A key after
    the query, with causal=True, counts as hidden when its weight is 0 to the tolerance (what the grade asks);
    any other key only when its weight is exactly 0 in every batch element and head, as a mask leaves it
    (-inf, -1e9 or a zero put after the softmax), never a weight that is merely small: a softmax of other
    scores may give one, and it hides nothing."""
    t_q, t_k = weights.shape[-2:]
    if (t_q, t_k) != (inp.sizes["T_q"], inp.sizes["T_k"]):
        return None
    axes = tuple(range(weights.ndim - 2))
    lower = np.tril(np.ones((t_q, t_k), dtype=bool))
    future = ~lower
    expected = future if inp.causal else np.zeros_like(future)
    zero = np.where(expected, np.all(np.abs(weights) <= tol, axis=axes), np.all(weights == 0, axis=axes))
    if np.array_equal(zero, expected):
        return None
    if inp.causal and np.array_equal(zero, np.tril(np.ones((t_q, t_k), dtype=bool), -1)):
        return "the keys before each query get weight 0 and the later ones do not", BY_KEY["mask_inverted"].fix
    if inp.causal and np.array_equal(zero, future | np.eye(t_q, t_k, dtype=bool)):
        return "each query gives weight 0 to its own key too", BY_KEY["mask_strict"].fix
    if inp.causal and not zero.any():
        return "the weights of keys after the query are not 0", BY_KEY["no_mask"].fix
    full = np.ones((t_q, t_k), dtype=bool)
    shifted = next((k for k in range(1 - t_q, t_k) if k and np.array_equal(zero, ~np.tril(full, k))), None)
    if inp.causal and shifted is not None:
        return mask_shift_story(shifted, t_q, t_k)
    if not inp.causal:
        return "some weights are 0 although causal=False", BY_KEY["mask_always"].fix
    if zero[lower].any():
        return ("some keys at or before the query get weight 0",
                "query i may attend to keys 0..i: hide only j > i (torch.ones(T_q, T_k).tril())")
    return ("some keys after the query get a weight that is not 0",
            "hide every key j > i: torch.ones(T_q, T_k).tril() as the allowed positions")


def mask_shift_story(k: int, t_q: int, t_k: int) -> tuple[str, str]:
    """(what, fix) for a mask that keeps keys 0..i+k (tril(k)) instead of 0..i."""
    fix = "query i may attend to keys 0..i (the first key aligned with the first query): torch.ones(T_q, T_k).tril()"
    if k == t_k - t_q:
        return f"query i sees keys 0..i{k:+d} (tril(T_k - T_q), the bottom-right alignment)", fix
    if k == 1:
        return "each query also sees the key right after it (tril(1))", fix
    return f"query i sees keys 0..i{k:+d} (tril({k}))", fix


def weights_layout_story(got: np.ndarray, want: np.ndarray, tol: float) -> tuple[str, str] | None:
    """(label, sentence) when the weights are right but returned transposed or reshaped."""
    from .arrays import all_close
    b, h, t_q, t_k = want.shape
    if all_close(got, want.swapaxes(-1, -2), tol) and (t_q != t_k or not all_close(got, want, tol)):
        return ("weights right but transposed (observed)", f"On this call your weights are right but transposed, "
                f"(B, h, T_k, T_q) = {tuple(got.shape)}: return weights as the softmax gives them, (B, h, T_q, T_k) "
                "(no .transpose).")
    if got.shape != want.shape and got.size == want.size and all_close(got.reshape(want.shape), want, tol):
        return ("weights right but reshaped (observed)", f"On this call your weights are right but shaped "
                f"{tuple(got.shape)}, not (B, h, T_q, T_k) = {tuple(want.shape)}: return them as (B, h, T_q, T_k), "
                "e.g. weights.view(B, h, T_q, T_k).")
    return None


def softmax_axis_story(weights: np.ndarray, tol: float) -> str | None:
    """Which axis the weights sum to 1 over, when it is not the keys'."""
    if weights.ndim == 4 and np.allclose(weights.sum(axis=(-2, -1)), 1.0, atol=100 * tol):
        return "the whole (T_q, T_k) matrix of each head at once"
    for axis, text in ((-2, "the queries (dim=-2)"), (1, "the heads (dim=1)"), (0, "the batch (dim=0)")):
        if weights.ndim == 4 and np.allclose(weights.sum(axis=axis), 1.0, atol=100 * tol):
            return text
    return None


def dropout_rate(got: np.ndarray, want: np.ndarray, tol: float) -> float | None:
    """p when ``got`` is ``want`` with some entries zeroed and the rest scaled by 1/(1-p) (dropout)."""
    if got.shape != want.shape:
        return None
    kept = np.abs(got) > tol
    dropped = ~kept & (want > 100 * tol)
    if not dropped.any() or not kept.any():
        return None
    ratio = got[kept] / np.where(want[kept] == 0, np.nan, want[kept])
    if np.isnan(ratio).all():
        return None
    c = float(np.nanmedian(ratio))
    if not np.isfinite(c) or c <= 1 or not np.allclose(ratio, c, rtol=10 * tol, atol=0, equal_nan=False):
        return None
    return 1 - 1 / c
