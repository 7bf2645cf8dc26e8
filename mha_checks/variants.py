"""The reference answers of exercises 1-4 with mistake switches, and the words for each mistake.

Each function here computes what the exercise's function returns with the given mistakes switched
on (an empty set: the right answer), raising where the mistake raises. The judge names a mistake
(alone or with one other) only where it reproduces the student's answer on every call of a test
(:func:`mha_checks.diagnosis.search.search`). Exercise 5's switches live in :mod:`mha_checks.attention`.
"""
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Switch:
    key: object  # a name, or a tuple (a name and the parameters the switch was fitted with)
    label: str   # the mistake in plain words (stable: class statistics count it)
    fix: str     # what to do instead, one clause
    dtype: str = ""  # a mistake of precision: its answer is held to this dtype's tolerance


class Failure(Exception):
    """How a switch's reference fails where NumPy would not fail as the student's code does (a reshape
    with the query's length, an assert, a .view() of a transposed tensor): its signature (see
    :func:`mha_checks.diagnosis.errors.signature`)."""

    def __init__(self, signature: tuple, text: str = "", also: tuple = ()):
        super().__init__(text or repr(signature))
        self.signature = signature
        self.forms = (signature, *also)  # the same mistake in other code gives these words (same_failure)


UNBATCHED = ("rank", 3, 2)  # code written for (B, T, d_in) given (T, d_in): three axes expected, two found
UNBATCHED_EINSUM = ("rank", "einsum", 0)  # the same in np.einsum's words: more subscripts than operand 0 has axes


# --- mistakes any function can make -------------------------------------------------------------

SQUEEZE = Switch("squeeze", "axes of size 1 dropped (a stray .squeeze())",
                 ".squeeze() drops every axis of size 1, a batch of one (B = 1) or a single position (T = 1) "
                 "included: remove it, or name the axis it may drop")
HALF_WORDS = ("precision lost (16-bit arithmetic inside)",
              "your values are right to about 3 digits only, as if computed in float16 (or bfloat16) and converted "
              "back to a wider dtype, which is held to 1e-5: compute in float32 or float64, or return the 16-bit "
              "result as it is (a 16-bit answer is held to 16-bit precision)")
HALF = Switch("half", *HALF_WORDS)  # exercises 1-4: NumPy's float16 arithmetic, reproduced exactly
HALF_PRODUCT = Switch("half_product", HALF_WORDS[0], HALF_WORDS[1])  # the product in float16, the bias added after
GENERIC = (SQUEEZE, HALF)
GENERIC_KEYS = frozenset(s.key for s in GENERIC)


def sixteen(value):
    """``value``'s arrays (a list's too) as float16: the inputs of a function computed in 16 bits."""
    if isinstance(value, list | tuple):
        return type(value)(sixteen(v) for v in value)
    return value.astype(np.float16) if isinstance(value, np.ndarray) else value


def widened(value):
    """A result computed in 16 bits, converted back to float64 (as `.astype(np.float64)` does)."""
    if isinstance(value, list | tuple):
        return type(value)(widened(v) for v in value)
    return value.astype(np.float64) if isinstance(value, np.ndarray) else value


def generic(result, m):
    """``result`` with the mistakes every function can make (:data:`GENERIC`) switched on (a function computed
    in 16 bits with "half" gets its inputs in float16 from its caller: see :func:`sixteen`)."""
    result = widened(result) if "half" in m else result
    return np.squeeze(result) if "squeeze" in m else result


def _plus(y, b):
    return y if b is None else y + b


# --- exercise 1 and 4: a linear map x @ w + b ------------------------------------------------

def linear_switches(w: str, b: str, product: str, layout: str = "(d_in, d_out)") -> list[Switch]:
    """The mistakes of ``x @ w + b`` in the names of one exercise (w/b or w_o/b_o)."""
    bias_left_out = "the bias was left out" if b == "b" else f"the output bias {b} was left out"
    transposed = (f"{w} used transposed (torch.nn.Linear's (d_out, d_in) layout)" if w == "w"
                  else "W^O used transposed (torch.nn.Linear's (d_out, d_in) layout)")
    return [
        Switch("no_bias", bias_left_out, f"add {b} after the product: x @ {w} + {b} ({b} is None only when "
               "no bias is given)"),
        Switch("w_T", transposed, f"here {w} is {layout} and acts on the right: x @ {w}, without .T"),
        Switch("elementwise", "an element-wise product instead of a matrix product",
               f"x * {w} multiplies entry by entry; use the matrix product x @ {w}"),
        Switch("bias_first", f"the bias added before {product}",
               f"{b} has d_out entries and comes last: x @ {w} + {b}, not (x + {b}) @ {w}"),
        Switch("bias_twice", "the bias added twice", f"add {b} once: x @ {w} + {b}"),
        Switch("bias_minus", "the bias subtracted", f"add {b}: x @ {w} + {b}"),
        Switch("x_T", "x used transposed", "multiply x itself, (..., d_in), by w: x @ w"),
        Switch("x_T_all", "x.T on a batched x (.T reverses all three axes, not the last two)",
               f"x @ {w} works for (T, d_in) and (B, T, d_in) alike; x.swapaxes(-1, -2) transposes only the last two "
               "axes"),
        Switch("none_bias", f"{b}=None not handled", f"{b} is None when there is no bias, and adding None fails: "
               f"add the bias only when it is given (if {b} is not None: out = out + {b})"),
        *([Switch("batched_only", "fails on unbatched input", "an unbatched x is (T, d_in): write the projection "
                  "for any leading axes (x @ w works for (T, d_in) and (B, T, d_in) alike)")] if w == "w" else []),
        *[Switch(("scaled", name), f"the product divided by {name}", f"x @ {w} is not scaled: remove the /{name}")
          for name in ("sqrt(d_in)", "sqrt(d_out)", "d_in", "d_out")],
        HALF_PRODUCT,
    ]


SCALES = {"sqrt(d_in)": lambda w: math.sqrt(w.shape[0]), "sqrt(d_out)": lambda w: math.sqrt(w.shape[1]),
          "d_in": lambda w: w.shape[0], "d_out": lambda w: w.shape[1]}


def scaled_by(factor: float, wname: str) -> Switch:
    """A constant factor on the product, fitted on one call (named only if it holds on every call)."""
    return Switch(("scaled by", factor), f"the product scaled by {factor:.4g}",
                  f"x @ {wname} is not scaled: remove the factor {factor:.4g}")


def linear(x, w, b=None, m=frozenset()):
    if "batched_only" in m and np.ndim(x) == 2:
        raise Failure(UNBATCHED, "not enough values to unpack (expected 3, got 2)", also=(UNBATCHED_EINSUM,))
    if "half_product" in m:  # the product computed in float16, the bias added in the inputs' dtype
        return linear(*sixteen((x, w)), None, (m - {"half_product"}) | {"half"}) + (0 if b is None else b)
    w_ = np.swapaxes(w, -1, -2) if "w_T" in m else w
    x_ = np.swapaxes(x, -1, -2) if "x_T" in m else x
    if "bias_first" in m and b is not None:
        x_ = x_ + b
    out = x_ * w_ if "elementwise" in m else (w_.T @ x_.T).T if "x_T_all" in m else x_ @ w_
    for key in m:
        if isinstance(key, tuple) and key[0] == "scaled":
            out = out / SCALES[key[1]](w)
        elif isinstance(key, tuple) and key[0] == "scaled by":
            out = out * key[1]
    if b is None and "none_bias" in m:
        out = out + b  # raises as adding None does
    if b is None or {"no_bias", "bias_first"} & m:
        return generic(out, m)
    return generic(out - b if "bias_minus" in m else out + (2 * b if "bias_twice" in m else b), m)


# --- exercise 1 part B: fuse_heads ---------------------------------------------------------------

FUSE_SWITCHES = [
    Switch("interleaved", "heads interleaved (stacked on a new last axis, then reshaped)",
           "head i must own the contiguous columns i*d_k:(i+1)*d_k: put the (d, d_k) blocks side by side "
           "with np.concatenate(w_heads, axis=1)"),
    Switch("rows", "heads stacked as rows (axis 0) instead of side by side as columns",
           "the fused w keeps d rows and gets h*d_k columns: concatenate along axis=1"),
    Switch("summed", "heads summed instead of placed side by side",
           "each head keeps its own columns: concatenate the blocks, do not add them"),
    Switch("no_bias", "the biases were not fused",
           "return the biases concatenated in the order of the columns, shape (h*d_k,)"),
    Switch("reversed", "heads in reverse order", "head 0 comes first: concatenate w_heads in the given order"),
    Switch("bias_stacked", "the biases stacked as (h, d_k) instead of concatenated",
           "concatenate them into one (h*d_k,) vector: np.concatenate(b_heads)"),
    Switch("bias_interleaved", "the biases interleaved (stacked on a new last axis, then flattened)",
           "bias i*d_k + j is head i's entry j: np.concatenate(b_heads), in the order of the columns"),
    Switch("w_alone", "the fused w returned alone, not the pair (w, b)",
           "return w, b, with b None when b_heads is None"),
]


def fuse(w_heads, b_heads=None, m=frozenset()):
    ws = list(w_heads)[::-1] if "reversed" in m else list(w_heads)
    bs = None if b_heads is None else (list(b_heads)[::-1] if "reversed" in m else list(b_heads))
    if "interleaved" in m:
        w = np.stack(ws, axis=-1).reshape(ws[0].shape[0], -1)
    elif "rows" in m:
        w = np.concatenate(ws, axis=0)
    elif "summed" in m:
        w = sum(ws)
    else:
        w = np.concatenate(ws, axis=1)
    if "w_alone" in m:
        return w
    if bs is None or "no_bias" in m:
        return w, None
    if "summed" in m:
        return w, sum(bs)
    if "bias_interleaved" in m:
        return w, np.stack(bs, axis=-1).reshape(-1)
    return w, np.stack(bs) if "bias_stacked" in m else np.concatenate(bs)


# --- exercise 2 and 3: split and merge (rearrangements; see arrange.py) -------------------------

SPLIT_NAMES = {  # (arrangement order, transpose) -> (label, fix)
    "plain": ("reshape without transpose",
              "x.reshape(B, h, T, d_k) cuts the data in the wrong places: reshape to (B, T, h, d_k) first, "
              "then swap axes 1 and 2"),
    (("B", "T", "d_k", "h"), (0, 3, 1, 2)): (
        "heads interleaved (feature j sent to head j % h)",
        "head i owns the contiguous features i*d_k:(i+1)*d_k: reshape the last axis as (h, d_k), not (d_k, h)"),
    (("B", "T", "h", "d_k"), (0, 2, 3, 1)): (
        "the wrong axes swapped (T and d_k end up exchanged)",
        "after reshaping to (B, T, h, d_k), swap only axes 1 and 2: (B, h, T, d_k)"),
}
SPLIT_FIX = "reshape to (B, T, h, d_k), then swap axes 1 and 2: x.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)"
SPLIT_ALONG_TIME = ("split along time instead of features",
                    "the heads cut the feature axis (the last): np.split(x, num_heads, axis=-1), or reshape to "
                    "(B, T, h, d_k) and swap axes 1 and 2")
B_T_MIXED = ("B and T mixed up in the reshape",
             "the input is batch-first, (B, T, d): reshape to (B, T, h, d_k) in that order")

MERGE_NAMES = {
    (("B", "h", "T", "d_v"), (0, 2, 3, 1)): (
        "merged in the wrong axis order (d_v before h: features interleaved)",
        "Concat puts head 1's d_v features, then head 2's: transpose to (B, T, h, d_v), not (B, T, d_v, h)"),
}
MERGE_FIX = "swap the h and T axes, then reshape: x.transpose(0, 2, 1, 3).reshape(B, T, h*d_v)"
MERGE_PLAIN = ("reshape without transpose",
               "x.reshape(B, T, h*d_v) reads the heads' data in the wrong order: swap the h and T axes first "
               "(to (B, T, h, d_v)), then reshape")
MERGE_ALONG_TIME = ("heads concatenated along time instead of features",
                    "the heads go side by side along the last (feature) axis: (B, T, h*d_v), not (B, h*T, d_v)")
MERGE_B_T = ("heads merged with B and T swapped",
             "keep the batch axis first: x.transpose(0, 2, 1, 3) gives (B, T, h, d_v)")

MERGE_SWITCHES = [
    Switch("reversed", "heads concatenated in reverse order",
           "head 0 comes first: x.transpose(0, 2, 1, 3) keeps the heads in order"),
    Switch("mean", "heads averaged instead of concatenated",
           "Concat(head_1, ..., head_h) keeps every head: the result has h*d_v features, not d_v"),
    Switch("sum", "heads summed instead of concatenated",
           "Concat(head_1, ..., head_h) keeps every head: the result has h*d_v features, not d_v"),
    Switch("along_time", *MERGE_ALONG_TIME),
    Switch("memory_order", "the view's memory read as if it were contiguous (as_strided, frombuffer, .base)",
           "x may be a transposed view (split_heads returns one): reach its elements through its axes, "
           "x.transpose(0, 2, 1, 3).reshape(B, T, h*d_v), never through its memory"),
]
SPLIT_SWITCHES = [Switch("along_time", *SPLIT_ALONG_TIME)]


def arranged(x, names: dict, asked: tuple, m) -> np.ndarray | None:
    """x's elements as an arrangement switch of ``m`` lays them out: x.reshape(order).transpose(perm),
    then in the shape asked (or as the transpose leaves it); None when ``m`` holds none."""
    for key in m:
        if isinstance(key, tuple) and key[0] == "arranged":
            _, order, perm, own = key
            out = x.reshape([names[n] for n in order]).transpose(perm)
            return out if own else out.reshape(asked)
    return None


def arrangement_switch(found, own: bool, story: tuple | None, fix: str) -> Switch:
    """The switch of an arrangement found in one answer (see :mod:`mha_checks.arrange`), kept in the
    transpose's own shape or reshaped to the one asked: ``story`` names it, else its code does."""
    label, why = story or (f"elements arranged as {found.code()}", f"your result is {found.code()}: {fix}")
    return Switch(("arranged", found.order, found.perm, own), label, why)


def merge(x, m=frozenset()):
    b, h, t, d_v = x.shape
    if "memory_order" in m:
        x = np.ravel(x, order="K").reshape(x.shape)  # the memory, read as a contiguous (B, h, T, d_v)
    out = arranged(x, {"B": b, "h": h, "T": t, "d_v": d_v}, (b, t, h * d_v), m)
    if out is not None:
        return generic(out, m)
    if "reversed" in m:
        x = x[..., ::-1, :, :]
    if "mean" in m:
        return generic(x.mean(axis=-3), m)
    if "sum" in m:
        return generic(x.sum(axis=-3), m)
    if "along_time" in m:
        return generic(x.reshape(b, h * t, d_v), m)
    x = np.swapaxes(x, -2, -3)
    return generic(x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1]), m)


def split(x, h, m=frozenset()):
    b, t, d = x.shape
    out = arranged(x, {"B": b, "T": t, "h": h, "d_k": d // h}, (b, h, t, d // h), m)
    if out is not None:
        return generic(out, m)
    if "along_time" in m:
        return generic(np.stack(np.split(x, h, axis=1), axis=1), m)  # raises where h does not divide T
    x = x.reshape(*x.shape[:-1], h, x.shape[-1] // h)
    return generic(np.swapaxes(x, -2, -3), m)


# --- exercise 4 part B: output_projection_per_head -------------------------------------------

PER_HEAD_SWITCHES = [
    Switch("mean", "heads averaged instead of summed",
           "Concat(head_1..head_h) W^O = head_1 W^O_1 + ... + head_h W^O_h: a sum, not a mean"),
    Switch("bias_each", "the bias added once per head", "b_o belongs to the whole layer: add it once, after the sum"),
    Switch("no_bias", "the output bias b_o was left out", "add b_o once, after the sum over heads"),
    Switch("columns", "column blocks of W^O instead of row blocks",
           "head i meets the rows i*d_v:(i+1)*d_v of W^O (its features in the concatenation)"),
    Switch("merge_no_T", "heads concatenated by a reshape without transpose",
           "if you concatenate first, swap the h and T axes before reshaping to (B, T, h*d_v)"),
    Switch("w_T", "W^O used transposed (torch.nn.Linear's (d_out, d_in) layout)",
           "here w_o is (h*d_v, d_model) and acts on the right, without .T"),
    Switch("first_block", "every head multiplied by the first block of W^O",
           "head i uses its own rows w_o[i*d_v:(i+1)*d_v]"),
    Switch("never_summed", "heads projected but never summed",
           "your result holds every head's term head_i @ W^O_i, (B, h, T, d_model), each right, but not their "
           "sum: add them over the heads (axis 1), then add b_o once"),
    Switch("none_bias", "b_o=None not handled", "b_o is None when there is no bias, and adding None fails: add "
           "the bias only when it is given (if b_o is not None: out = out + b_o)"),
    *[Switch(("heads", first, last), "heads left out of the sum",
             f"sum over every head, range(h), not range({first or 0}, {'h' if not last else f'h - {last}'})")
      for first, last in ((1, 0), (0, 1), (1, 1), (2, 0), (0, 2))],
]


def per_head(heads, w_o, b_o=None, m=frozenset()):
    h, d_v = heads.shape[-3], heads.shape[-1]
    w = np.swapaxes(w_o, -1, -2) if "w_T" in m else w_o
    kept = next((range(k[1], h - k[2]) for k in m if isinstance(k, tuple) and k[0] == "heads"), range(h))
    if "merge_no_T" in m:
        concat = heads.reshape(*heads.shape[:-3], heads.shape[-2], h * d_v)
        out = concat @ w
    else:
        def block(i):
            i = 0 if "first_block" in m else i
            return w[:, i * d_v:(i + 1) * d_v] if "columns" in m else w[i * d_v:(i + 1) * d_v]
        terms = [heads[..., i, :, :] @ block(i) for i in kept]
        out = np.stack(terms, axis=-3) if "never_summed" in m else sum(terms) / h if "mean" in m else sum(terms)
    if b_o is None and "none_bias" in m:
        out = out + b_o  # raises as adding None does
    if b_o is None or "no_bias" in m:
        return generic(out, m)
    return generic(out + h * b_o if "bias_each" in m else out + b_o, m)
