"""The visible tests of the notebooks: the same path as the grader (a Case, calling.call,
judge), in the student's own kernel, on small explicit inputs.

A grade cell calls ``check("split_heads", x, 2, expected=...)``: the function is found by its
name in the notebook, so a function that is not defined (a syntax error in its cell, a cell not
run) is reported as that, with the line, instead of a NameError in the test. A failure raises
:class:`CheckFailed`, whose rendering is the message alone, wrapped to 78 columns: no
traceback through the checking code, and nothing cut by ``nbgrader validate`` or unwrapped in
the JupyterLab Validate dialog. A check that passes prints one line saying so.
"""
import inspect
import linecache
import re
import sys
import textwrap

import numpy as np

from . import admission, calling
from .cases import AttnWeights, Case, DecoderWeights, MhaWeights
from .hidden import NAMES
from .judge import judge

WIDTH = 78


class CheckFailed(AssertionError):
    """A failed visible test: its text is the whole message, already wrapped."""

    def __init__(self, message: str):
        super().__init__(wrap(message))

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback (the lines of the message)."""
        return str(self).splitlines()


OPERATORS = {"@", "+", "-", "*", "/", "=", "==", "!=", "->", "<=", ">="}


def wrap(message: str, width: int = WIDTH) -> str:
    """Every line of ``message`` at most ``width`` characters. A line never breaks inside a short
    formula (``x @ w + b``) or a short parenthesis (``(B, T_q, d_model)``) when it can break before it."""
    lines = []
    for paragraph in str(message).splitlines() or [""]:
        line = ""
        for chunk in _chunks(paragraph.split()):
            pieces = [chunk] if len(chunk) <= width else textwrap.wrap(chunk, width, break_on_hyphens=False)
            for piece in pieces:
                if line and len(line) + 1 + len(piece) > width:
                    lines.append(line)
                    line = piece
                else:
                    line = f"{line} {piece}" if line else piece
        lines.append(line)
    return "\n".join(lines)


def _chunks(words: list[str], longest: int = 40) -> list[str]:
    """Words glued into the groups a line should not split: a formula, a parenthesis."""
    out: list[str] = []
    depth = 0
    for word in words:
        glue = out and (depth > 0 or word in OPERATORS or out[-1].split()[-1] in OPERATORS)
        if glue and len(out[-1]) + 1 + len(word) <= longest:
            out[-1] += " " + word
        else:
            out.append(word)
        depth = max(0, out[-1].count("(") - out[-1].count(")"))
    return out


def check(function: str, *args, expected=None, shape_only: bool = False, weights_only: bool = False) -> None:
    """Run ``function`` (a name defined in the notebook) on ``args`` and judge the result."""
    __tracebackhide__ = True
    namespace = sys._getframe(1).f_globals
    fn = find_function(function, namespace)
    # the grader's rule on what the function reaches, in the cells this kernel ran (the grader's verdict)
    refused = admission.visible_refusals(function, namespace, textwrap.dedent(cell_source(fn)))
    if refused:
        raise CheckFailed(f"{function}: " + admission.explain(refused)) from None
    kind = "shape" if shape_only else "weights" if weights_only else "values"
    case = Case(function, NAMES[function], tuple(plain(a) for a in args), kind, _expected(expected))
    verdict = judge(case, calling.call(fn, list(case.names), case.specs()))
    if not verdict.passed:
        raise CheckFailed(verdict.message) from None
    print(f"PASSED: {function}({', '.join(_brief(a) for a in args)}) gives the right {kind}.")


def _brief(value) -> str:
    """An argument as a pass line names it: an array by its shape, a module by its sizes."""
    if hasattr(value, "in_proj_weight"):
        return f"MultiheadAttention({value.embed_dim}, {value.num_heads})"
    if hasattr(value, "layers") and hasattr(value, "norm"):
        return f"<decoder of {len(value.layers)} blocks>"
    if hasattr(value, "q_proj"):
        return f"<attention {value.embed_dim}, {value.num_heads} heads>"
    if isinstance(value, tuple | list) and len(value) == 2 and all(hasattr(v, "shape") for v in value):
        return f"({_brief(value[0])}, {_brief(value[1])})"
    shape = getattr(value, "shape", None)
    return f"<array {tuple(shape)}>" if shape is not None else repr(value)


def cell_source(fn) -> str:
    """The whole cell (IPython keeps it in linecache) that defined ``fn``, or its own source."""
    code = getattr(fn, "__code__", None)
    cell = code is not None and (code.co_filename.startswith(("<cell", "<ipython-input"))
                                 or "ipykernel_" in code.co_filename)
    lines = linecache.getlines(code.co_filename) if cell else []
    if lines:
        return "".join(lines)
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _numpy(t) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def _attn_weights(attn) -> AttnWeights:
    """Exercise 6's attention (a stand-in or an ``mha_lib.decoder.CausalSelfAttention``) as its weights."""
    return AttnWeights(int(attn.embed_dim), int(attn.num_heads),
                       {f"{p}_{w}": _numpy(getattr(getattr(attn, p), w)) for p in calling.PROJECTIONS
                        for w in ("weight", "bias")})


def _decoder_weights(decoder) -> DecoderWeights:
    """Exercise 6's decoder (a stand-in or an ``mha_lib.decoder.Decoder``) as its weights."""
    def pair(module, name):
        return {f"{name}_weight": _numpy(module.weight), f"{name}_bias": _numpy(module.bias)}
    layers = []
    for block in decoder.layers:
        ff = getattr(block, "feed_forward", block)  # the stand-in's feed_forward holds linear1, linear2
        layers.append({"attn": _attn_weights(block.self_attn), **pair(block.norm1, "norm1"),
                       **pair(block.norm2, "norm2"), **pair(ff.linear1, "linear1"), **pair(ff.linear2, "linear2")})
    return DecoderWeights(tuple(layers), {"weight": _numpy(decoder.norm.weight), "bias": _numpy(decoder.norm.bias)},
                          float(decoder.norm.eps))


def plain(value):
    """A notebook value as a Case argument: arrays stay, tensors are marked, a module becomes its weights."""
    if hasattr(value, "layers") and hasattr(value, "norm"):
        return _decoder_weights(value)
    if hasattr(value, "q_proj") and hasattr(value, "out_proj"):
        return _attn_weights(value)
    if hasattr(value, "in_proj_weight") and hasattr(value, "out_proj"):
        w = {"in_proj_weight": value.in_proj_weight, "in_proj_bias": value.in_proj_bias,
             "out_proj_weight": value.out_proj.weight, "out_proj_bias": value.out_proj.bias}
        return MhaWeights(value.embed_dim, value.num_heads, {k: v.detach().cpu().numpy().copy() for k, v in w.items()})
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return calling.Tensor(value.detach().cpu().numpy().copy(order="K"))  # a transposed view stays one
    if isinstance(value, list | tuple):  # a list of heads, or exercise 6's cache (keys, values)
        return [plain(v) for v in value]
    return value


def _expected(expected):
    if expected is None:
        return None
    if isinstance(expected, tuple):
        return tuple(None if e is None else np.asarray(plain(e), dtype=np.float64) for e in expected)
    return np.asarray(plain(expected), dtype=np.float64)


def find_function(name: str, namespace: dict):
    """The student's function, or :class:`CheckFailed` saying why it is not there (with the line
    of a syntax error in the cell that should define it: IPython's ``In`` holds the cells)."""
    fn = namespace.get(name)
    if callable(fn):
        return fn
    cells = namespace.get("In") or []
    pattern = re.compile(rf"^\s*def\s+{re.escape(name)}\s*\(", re.M)
    for source in reversed(list(cells)):
        if not isinstance(source, str) or not pattern.search(source):
            continue
        try:
            compile(source, "<cell>", "exec")
        except SyntaxError as err:
            text = (err.text or "").strip()
            raise CheckFailed(f"{name} is not defined: the cell that defines it has a "
                              f"{type(err).__name__} on line {err.lineno} ({err.msg})"
                              + (f" in `{text}`" if text else "") + ". Fix that line, run the cell, then run "
                              "this test again.") from None
        raise CheckFailed(f"{name} is not defined: its cell compiles but did not finish when it ran (an error "
                          "before or in the def?). Run that cell again and read its error, then run this "
                          "test again.") from None
    raise CheckFailed(f"{name} is not defined: write it in its solution cell and run that cell (and the "
                      "cells above it) first.") from None


def small_mha(embed_dim: int, num_heads: int, seed: int):
    """A ``torch.nn.MultiheadAttention`` (batch_first) whose weights AND biases are random: torch
    starts its biases at 0, which would hide a forgotten bias. Seeds torch, for the inputs after."""
    import torch
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_(0.0, 0.3)
    return mha.eval()


def worked_example_mha():
    """Exercise 5's worked example: d_model=4, h=2, W^Q = W^K = 0, W^V = I, W^O = I, b^O = [.5, -.5, 1, -1]."""
    import torch
    mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.zero_()
        mha.in_proj_weight[8:].copy_(torch.eye(4))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(4))
        mha.out_proj.bias.copy_(torch.tensor([0.5, -0.5, 1.0, -1.0]))
    return mha.eval()


def small_decoder(layers: int, d_model: int, num_heads: int, d_ff: int, seed: int, dtype=None):
    """Exercise 6's decoder: the course's own ``mha_lib.decoder.Decoder`` with every weight, bias and
    LayerNorm parameter random (so that a forgotten bias or norm shows), handed over as the grader hands
    it: its weights, read-only, with ``layers[i].norm1 / self_attn / norm2 / feed_forward`` and ``norm``
    callable, and nothing that computes attention. Seeds torch, for the inputs after."""
    import torch
    from mha_lib.decoder import Decoder
    torch.manual_seed(seed)
    decoder = Decoder(layers, d_model, num_heads, d_ff).to(dtype or torch.float32).eval()
    with torch.no_grad():
        for name, p in decoder.named_parameters():
            if p.dim() == 1:  # biases, and the LayerNorms' scales (1 + noise) and offsets
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.3 * torch.randn_like(p))
    return calling.build_argument(_decoder_weights(decoder).spec())


def small_attention(d_model: int, num_heads: int, seed: int, dtype=None):
    """One layer's attention of the course's decoder (``mha_lib.decoder.CausalSelfAttention``), biases random,
    handed over as the grader hands it (its weights; calling it computes nothing). Seeds torch."""
    return small_decoder(1, d_model, num_heads, 2 * d_model, seed, dtype).layers[0].self_attn
