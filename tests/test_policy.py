"""mha_checks.policy: every attention kernel torch exposes is refused, under every spelling tried;
no honest style is refused (the reference answers, the right-answer catalogue, common idioms)."""
import pytest
import torch
import torch.nn.functional as F

from mha_checks.policy import violations
from submissions import judged
from submissions.correct import CORRECT


def _names(namespace) -> list[str]:
    return sorted(n for n in dir(namespace) if "attention" in n.lower())


KERNELS = ([("torch", n) for n in _names(torch)] + [("F", n) for n in _names(F)]
           + [("torch.ops.aten", n) for n in _names(torch.ops.aten)]
           + [("torch.nn", n) for n in dir(torch.nn) if n == "MultiheadAttention" or n.startswith("Transformer")])

SPELLINGS = [
    "def f(q, k, v):\n    return {mod}.{name}(q, k, v)\n",
    "g = {mod}.{name}\n\ndef f(q, k, v):\n    return g(q, k, v)\n",
    "def f(q, k, v):\n    return getattr({mod}, '{name}')(q, k, v)\n",
    "def f(q, k, v):\n    return {mod}.__dict__['{name}'](q, k, v)\n",
    "def f(q, k, v):\n    return vars({mod})['{name}'](q, k, v)\n",
    "def f(q, k, v):\n    return eval('{mod}.{name}')(q, k, v)\n",
    "import importlib\n\ndef f(q, k, v):\n    return importlib.import_module('torch').{name}(q, k, v)\n",
    "def f(q, k, v):\n    return {mod}.__getattribute__('{name}')(q, k, v)\n",
    "def f(q, k, v):\n    fn = [x for x in [{mod}] if True][0].{name}\n    return fn(q, k, v)\n",
]
IMPORTS = {"torch": "from torch import {name}", "F": "from torch.nn.functional import {name}",
           "torch.ops.aten": "from torch.ops.aten import {name}", "torch.nn": "from torch.nn import {name}"}


def test_the_kernels_are_enumerated():
    names = {n for _, n in KERNELS}
    assert {"scaled_dot_product_attention", "multi_head_attention_forward", "_scaled_dot_product_attention_math",
            "_native_multi_head_attention", "MultiheadAttention"} <= names
    assert len(KERNELS) >= 20


@pytest.mark.parametrize("module, name", KERNELS, ids=lambda x: str(x))
def test_every_kernel_is_refused_in_every_spelling(module, name):
    sources = [s.format(mod=module, name=name) for s in SPELLINGS]
    sources.append(IMPORTS[module].format(name=name) + "\n\ndef f(q, k, v):\n    return " + name.split(".")[-1]
                   + "(q, k, v)\n")
    for source in sources:
        found = violations(source, "f")
        assert found, source
        assert all(v.startswith("Line ") for v in found)


@pytest.mark.parametrize("source, words", [
    ("import mha_lib.reference as r\n\ndef f(x):\n    return r.split_heads(x, 2)\n", "ready-made answer"),
    ("from mha_checks import hidden\n", "ready-made answer"),
    ("import mha_grader\n", "ready-made answer"),
    ("import os\n", "not allowed"),
    ("import sys\n\ndef f():\n    return sys.modules\n", "not allowed"),
    ("def f(mha, x):\n    return mha.forward(x, x, x)\n", "entry points"),
    ("def f(mha):\n    return type(mha).mro()\n", "entry points"),
    ("def f(x):\n    return torch.jit.script(x)\n", "entry points"),
    ("def f(x):\n    return torch.compile(x)\n", "entry points"),
    ("def f(x):\n    return torch.hub.load('a', 'b')\n", "entry points"),
    ("def f():\n    return torch._C\n", "private name"),
    ("def f():\n    return open('/etc/passwd').read()\n", "builtin `open`"),
    ("def f():\n    return __builtins__\n", "internals"),
    ("class A(torch.nn.Module):\n    def __init__(self):\n        super(A, self).__init__()\n", "super()"),
    ("def f(x):\n    breakpoint()\n", "builtin `breakpoint`"),
    ("def f(x) -> int:\n  return (\n", "does not compile"),
])
def test_other_refusals_say_what_to_do(source, words):
    found = violations(source)
    assert found and any(words in v for v in found), found


def test_a_violation_names_its_line_and_the_fix():
    source = "import torch\nimport torch.nn.functional as F\n\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
    (found,) = violations(source, "f")
    assert found.startswith("Line 5: `F.scaled_dot_product_attention`") and "yourself" in found


HONEST = [
    "def scaled_dot_product_attention(q, k, v):\n    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
    "    return w @ v\n\n\ndef f(q, k, v):\n    return scaled_dot_product_attention(q, k, v)\n",
    "def f(x, mha):\n    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)\n    return F.linear(x, w_q, mha.in_proj_bias[:4])\n",
    "def f(s, allowed):\n    return s.masked_fill(~allowed, float('-inf')).softmax(-1)\n",
    "def f(q, k):\n    return torch.einsum('bhqd,bhkd->bhqk', q, k)\n",
    "from typing import Optional\nfrom functools import reduce\nimport itertools, collections, dataclasses\n"
    "from torch import nn\nfrom torch.nn import functional as F\nimport numpy as np\nimport math\n\n"
    "def f(input: Optional[np.ndarray] = None):\n    return input\n",
    "class Head(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        return x\n",
    "# Try it: torch's own forward is allowed outside the graded function\nmha = torch.nn.Linear(2, 2)\n"
    "def f(x):\n    return x\nprint(f(1))\n",
    "def f(x, mha):\n    return x @ mha.out_proj.weight.T + mha.out_proj.bias, mha.num_heads, mha.embed_dim\n",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_code_is_not_refused(source):
    assert violations(source, "f") == []


def test_the_reference_answers_and_the_right_styles_are_not_refused():
    cells = [(nb, cell, code) for nb in ("01_project", "02_split_heads", "03_merge_heads", "04_output_projection",
                                         "05_assembly") for cell, code in judged.reference_answers(nb).items()]
    cells += [(c.notebook, c.cell, c.code) for c in CORRECT]
    refused = {f"{nb}/{cell}": violations(code, cell) for nb, cell, code in cells if violations(code, cell)}
    assert not refused and len(cells) > 30
