"""A student's function that raised: the error, its line, and a mistake named only when it is verified
(a catalogued variant raises the same error on this case, or the error's own words say what it is);
otherwise what was observed about this call."""
import re

import numpy as np

from .. import attention, variants
from .common import Fail, _np, named


def error_fail(call: str, case, error: dict, sizes: dict) -> None:
    kind, message = str(error.get("type", "Exception")), str(error.get("message", ""))[:300]
    line = error.get("line")
    at = f" (line {line} of your cell)" if isinstance(line, int) else ""
    if kind == "NotImplementedError":
        raise Fail(f"{call} raised NotImplementedError: it is not written yet (replace "
                   "`raise NotImplementedError()` with your code).", "not written yet")
    hint = error_hint(case, message, sizes, kind) or same_error(case, kind, message)
    label = hint[0] if hint else f"raises {kind}"
    text = f" {hint[1]}" if hint else _numbers_note(message, sizes)
    raise Fail(f"{call} raised {kind}{at}: {message.rstrip('.')}.{text}", label)


def same_error(case, kind: str, message: str):
    """A mistake (or pair) of exercises 1-4 that raises exactly this error on this case."""
    runner = ERROR_VARIANTS.get(case.function)
    if runner is None:
        return None
    switches, compute = runner(case)
    for combo in variants.combos(switches):
        try:
            compute(frozenset(s.key for s in combo))
        except Exception as err:  # noqa: BLE001 - the error is what we compare
            if type(err).__name__ == kind and str(err)[:300] == message[:300]:
                return named(combo)
    return None


def _linear_runner(wname, bname):
    def runner(case):
        x, w, b = (_np(a) for a in (list(case.args) + [None])[:3])
        layout = "(d_in, d_out)" if wname == "w" else "(h*d_v, d_model)"
        return variants.linear_switches(wname, bname, "the product" if wname == "w" else "W^O", layout), \
            lambda m: variants.linear(x, w, b, m)
    return runner


def _per_head_runner(case):
    heads, w_o, b_o = (_np(a) for a in (list(case.args) + [None])[:3])
    return variants.PER_HEAD_SWITCHES, lambda m: variants.per_head(heads, w_o, b_o, m)


def _numbers_note(message: str, sizes: dict) -> str:
    """This call's sizes, for the student to read the error's numbers against (a number of the message
    is never labelled by its value alone: a 5 in it may be any of the sizes that are 5)."""
    return (" This call's sizes: " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + ".") if sizes else ""


SHAPE_ERRORS = {"RuntimeError", "ValueError", "AssertionError", "IndexError"}


def error_hint(case, message: str, sizes: dict, kind: str = ""):
    """(label, sentence) when the error's own words, read by position, say what happened, or a fact of
    this call that the error meets (None otherwise)."""
    bias = {"project": "b", "output_projection": "b_o", "output_projection_per_head": "b_o"}.get(case.function)
    if bias and "NoneType" in message and (list(case.args) + [None] * 3)[2] is None:
        return (f"{bias}=None not handled", f"Here {bias} is None (no bias) and adding None fails: add the bias "
                f"only when it is given, so when the bias is None return the product alone "
                f"(if {bias} is not None: out = out + {bias}).")
    keyword = re.search(r"unexpected keyword argument '(\w+)'", message)
    if keyword:
        return (f"wrong keyword argument {keyword.group(1)}=", f"The function you call has no argument named "
                f"{keyword.group(1)}= (NumPy's transpose takes axes=, torch's transpose two dims, TensorFlow's "
                "takes perm=): check its signature.")
    if case.function == "split_heads" and "equal division" in message:
        return ("split along an axis h does not divide", "A split along an axis h does not divide: np.split could "
                f"not cut an axis into h = {sizes['h']} "
                f"equal parts. The feature axis always can (d = h*d_k = {sizes['h'] * sizes['d_k']}); T = "
                f"{sizes['T']} and B = {sizes['B']} may not: {variants.SPLIT_ALONG_TIME[1]}.")
    if case.function in ("project", "output_projection"):
        return _linear_error(case, message)
    if case.function != "multi_head_attention" or not sizes:
        return None
    return _mha_error(case, message, sizes, kind)


def _linear_error(case, message: str):
    x, w = np.shape(case.args[0]), np.shape(case.args[1])
    wname = "w" if case.function == "project" else "w_o"
    found = re.search(r"shapes \(([\d, ]*)\) and \(([\d, ]*)\) not aligned: \d+ \(dim (\d+)\) != \d+ \(dim (\d+)\)",
                      message)
    other = _ints(found.group(2)) if found else ()
    w_axis = (int(found.group(4)) if other == w else len(w) - 1 - int(found.group(4)) if other == w[::-1] else -1) \
        if found else -1  # np.inner reports w transposed, its last axis as dim 0
    if found and _ints(found.group(1)) == x and int(found.group(3)) == len(x) - 1 and w_axis == len(w) - 1:
        switch = variants.linear_switches(wname, "b", "", "")[1]
        return named((switch,), f"Your product contracts x's last axis with {wname}'s last axis (np.inner(x, "
                     f"{wname}) does that), which is x @ {wname}.T. ")
    if len(x) == 2:
        return ("fails on unbatched input", "This x is unbatched, (T, d_in): write the projection for any "
                "leading axes (x @ w works for (T, d_in) and (B, T, d_in) alike).")
    return None


def _ints(text: str) -> tuple:
    return tuple(int(t) for t in re.findall(r"\d+", text))


def _mha_error(case, message: str, sizes: dict, kind: str):
    b, t_q, t_k, d, d_k = sizes["B"], sizes["T_q"], sizes["T_k"], sizes["d_model"], sizes["d_k"]
    mats = re.search(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", message)
    rows, width, w_in, w_out = map(int, mats.groups()) if mats else (0, 0, 0, 0)
    if mats and (rows, w_in, w_out) == (b * t_q, d, d) and width == d_k and d_k != d:
        return ("heads averaged or summed instead of concatenated", f"The tensor that met the (d_model, d_model) "
                f"weight is (B*T_q, d_k) = ({rows}, {width}): one head's width per position, as with heads averaged "
                "instead of concatenated (or summed, or all heads but one left out). "
                + attention.BY_KEY["heads_averaged"].fix + ".")
    if mats and (rows, w_in, w_out) == (b * t_q, d, d) and width % d_k == 0 and 0 < width < d:
        return ("heads left out", f"The tensor that met the (d_model, d_model) weight is (B*T_q, {width}): "
                f"{width // d_k} heads of d_k = {d_k} features, of the h = {sizes['h']}: heads left out. "
                "Concatenate every head (loop over range(h)): (B, T_q, h*d_k) = (B, T_q, d_model).")
    reshape = re.search(r"shape '\[([-\d, ]*)\]' is invalid for input of size (\d+)", message)
    if reshape and t_q != t_k and int(reshape.group(2)) == b * t_k * d and \
            _ints(reshape.group(1).replace("-1", "0"))[:2] == (b, t_q):
        return ("keys reshaped with the query's length", f"A reshape to ({reshape.group(1)}), with T_q = {t_q} in "
                f"the length's place, met {reshape.group(2)} = B*T_k*d_model elements: the key (or value) holds "
                f"T_k = {t_k} positions; reshape each with its own length (key.shape[1], or -1).")
    if t_q == t_k or kind not in SHAPE_ERRORS:
        return None
    which = "causal cross-attention" if case.args[4] else "cross-attention"
    facts = (f"This call is {which}: T_q = {t_q} queries, T_k = {t_k} keys, so the scores are (B, h, T_q, T_k) = "
             f"({b}, {sizes['h']}, {t_q}, {t_k})" + (f" and the mask (T_q, T_k) = ({t_q}, {t_k}), query i seeing "
                                                    "keys 0..i" if case.args[4] else "") + ".")
    if kind == "AssertionError" and case.args[4]:
        return (f"assert fails on {which} (T_q != T_k)", f"An assert fails on {which}. {facts} "
                "A mask need not be square: assert nothing that holds only when T_q = T_k.")
    return f"fails on {which} (T_q != T_k)", facts + " Every size that depends on the keys is T_k, not T_q."


ERROR_VARIANTS = {"project": _linear_runner("w", "b"), "output_projection": _linear_runner("w_o", "b_o"),
                  "output_projection_per_head": _per_head_runner}

