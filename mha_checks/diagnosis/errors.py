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
    hint = error_hint(case, message, sizes) or same_error(case, kind, message)
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
    """'Here 4 = d_k, 6 = T_q.' for the sizes an error message mentions."""
    names = {}
    for n, v in sizes.items():
        names.setdefault(int(v), []).append(n)
    said = []
    for token in dict.fromkeys(re.findall(r"(?<![\w.])(\d+)(?![\w.])", message)):
        v = int(token)
        if v > 1 and v in names and len(names[v]) == 1:
            said.append(f"{v} = {names[v][0]}")
    return f" Here {', '.join(said)}." if said else ""


def error_hint(case, message: str, sizes: dict):
    """A named mistake for errors that tell it: None added, an unbatched input, sizes of exercise 5."""
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
        return named((variants.Switch("", *variants.SPLIT_ALONG_TIME),), f"Here T = {sizes['T']} cannot be cut into "
                     f"h = {sizes['h']} equal parts. ")
    if case.function in ("project", "output_projection") and np.ndim(case.args[0]) == 2:
        return ("fails on unbatched input", "This x is unbatched, (T, d_in): write the projection for any "
                "leading axes (x @ w works for (T, d_in) and (B, T, d_in) alike).")
    if case.function != "multi_head_attention" or not sizes:
        return None
    numbers = {int(t) for t in re.findall(r"\d+", message)}
    d_k, d, t_q, t_k = sizes["d_k"], sizes["d_model"], sizes["T_q"], sizes["T_k"]
    if d_k != d and d_k in numbers and d in numbers and ("mat" in message or "shape" in message):
        return named((attention.BY_KEY["heads_averaged"],), "A tensor with d_k = "
                     f"{d_k} features met W^O, which needs d_model = {d}. ")
    size = re.search(r"invalid for input of size (\d+)", message)
    if size and t_q != t_k and t_q in numbers and int(size.group(1)) == sizes["B"] * t_k * d:
        return ("keys reshaped with the query's length", f"The key (or value) holds T_k = {t_k} positions but was "
                f"reshaped with the query's T_q = {t_q}: reshape each with its own length (key.shape[1], or -1).")
    if t_q != t_k and {t_q, t_k} <= numbers and case.args[4]:
        return named((attention.BY_KEY["mask_square"],), f"A ({t_q}, {t_q}) mask met scores with T_k = {t_k} "
                     "keys. ")
    return None


ERROR_VARIANTS = {"project": _linear_runner("w", "b"), "output_projection": _linear_runner("w_o", "b_o"),
                  "output_projection_per_head": _per_head_runner}

