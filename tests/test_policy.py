"""mha_checks.admission, the ready-made rule: every attention kernel torch exposes is refused under
every spelling tried (aliases, re-exports through admitted modules, strings, star imports, match
patterns, class bodies, private kernels); the allowlist's own edges hold; no honest style is
refused (the reference answers, the right-answer catalogue, the styles listed below)."""
import pytest
import torch
import torch.nn.functional as F

from mha_checks import admission
from submissions import judged
from submissions.correct import CORRECT

SETUP = "import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"


def refused(source: str) -> list[str]:
    """The refusals of a notebook whose read-only cell is SETUP and whose answer cell is ``source``."""
    return [str(r) for r in admission.refusals([{"label": "setup", "source": SETUP},
                                                {"label": "answer", "source": source}])]


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
    "class Holder:\n    kernel = {mod}.{name}\n\ndef f(q, k, v):\n    return Holder.kernel(q, k, v)\n",
    "def f(q, k, v, kernel={mod}.{name}):\n    return kernel(q, k, v)\n",
    "def f(q, k, v):\n    match {mod}:\n        case object({name}=kernel):\n            return kernel(q, k, v)\n",
    "alias = {mod}\n\ndef f(q, k, v):\n    return alias.{name}(q, k, v)\n",
    "def f(q, k, v):\n    return [g for g in [{mod}.{name}]][0](q, k, v)\n",
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
    sources.append(IMPORTS[module].format(name=name) + "\n\ndef f(q, k, v):\n    return " + name + "(q, k, v)\n")
    sources.append(IMPORTS[module].format(name="*") + "\n\ndef f(q, k, v):\n    return " + name + "(q, k, v)\n")
    for source in sources:
        found = refused(source)
        assert found, source
        assert all(v.startswith("In the cell 'answer', line ") for v in found)


# Routes through what the rule admits (re-exports, strings, machinery reached from values): each refused.
ROUTES = {
    "re-exported builtins": [
        "def f(x):\n    return torch.builtins.getattr(F, 'linear')\n",
        "import dataclasses\n\ndef f(x):\n    return dataclasses.builtins.exec('x = 1')\n",
        "def f(x):\n    return torch.sys.modules['torch.nn.functional']\n",
        "import typing\n\ndef f(x):\n    return typing.operator.attrgetter('nn.functional.linear')(torch)\n",
        "def f(x):\n    return torch.inspect.getmro(type(x))\n",
        "def f(x):\n    return torch.ctypes.pythonapi\n",
        "def f(x):\n    return np.ctypeslib.as_ctypes(x)\n",
        "def f(x):\n    return torch.overrides.get_overridable_functions()\n",
        "import functools\n\ndef f(x):\n    return functools.reduce.__self__\n",
        "from numpy.lib import npyio\n",
        "def f(x):\n    return np.load('/tmp/x.npy', allow_pickle=True)\n",
        "def f(x):\n    return torch.load('/tmp/x.pt')\n",
    ],
    "strings to names": [
        "def f(x):\n    return getattr(F, 'scaled_dot_' + 'product_attention')(x, x, x)\n",
        "def f(x):\n    name = bytes.fromhex('6c696e656172').decode()\n    return globals()[name]\n",
        "import pickle\n",
        "import string\n\ndef f(x):\n    return string.Formatter().get_field('0.nn', [torch], {})\n",
        "def f(x):\n    return __import__('torch').nn.functional.scaled_dot_product_attention(x, x, x)\n",
        "def f(x):\n    return compile('1', 'a', 'eval')\n",
        "def f(x):\n    return torch.ops.aten.linear(x, x)\n",
    ],
    "machinery reached from values": [
        "def f(x):\n    return x.__class__.__mro__\n",
        "def f(x):\n    return x.__dict__\n",
        "def f(x):\n    return type(x)\n",
        "def f(x):\n    g = (i for i in [1])\n    return g.gi_frame.f_back.f_globals\n",
        "def f(x):\n    try:\n        raise ValueError(x)\n    except ValueError as err:\n        return err.__traceback__\n",
        "def f(x):\n    try:\n        x.nothing\n    except AttributeError as err:\n        return err.obj, err.args\n",
        "def f(x):\n    return x.grad_fn.next_functions\n",
        "def f(x):\n    return x.numpy().ctypes\n",
        "def f(mha):\n    return mha.forward\n",
        "def f(x):\n    return super(int, 1, 2)\n",
        "def f(x):\n    match x:\n        case object(gi_frame=frame):\n            return frame\n",
        "def f(x):\n    match x:\n        case int(y):\n            return y\n",
    ],
    "the libraries and Python itself changed": [
        "torch.softmax = lambda x, dim: x\n",
        "class Meta(type):\n    pass\n",
        "class A(metaclass=abs):\n    pass\n",
        "class T(torch.Tensor):\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n        return func\n",
        "def __getattr__(name):\n    return name\n",
        "__builtins__ = {}\n",
        "def f(getattr):\n    return getattr\n",
        "F = None\n",
        "async def f(x):\n    return x\n",
        "import os\n",
        "from . import x\n",
        "from mha_lib import reference\n",
    ],
}


@pytest.mark.parametrize("source", [s for sources in ROUTES.values() for s in sources])
def test_every_route_through_the_allowlist_is_refused(source):
    found = refused(source)
    assert found and all(v.startswith("In the cell 'answer', line ") for v in found), source


@pytest.mark.parametrize("source, words", [
    ("import mha_lib.reference as r\n\ndef f(x):\n    return r.split_heads(x, 2)\n", "ready-made answer"),
    ("from mha_checks import hidden\n", "ready-made answer"),
    ("import os\n", "may import only"),
    ("def f(mha, x):\n    return mha.forward(x, x, x)\n", "entry points"),
    ("def f():\n    return torch._C\n", "private name"),
    ("def f():\n    return open('/etc/passwd').read()\n", "builtin `open`"),
    ("def f():\n    return __builtins__\n", "internals"),
    ("def f(x):\n    return type(x)\n", "isinstance"),
    ("def f(x):\n    return super(1, 2, 3)\n", "super(Class, self)"),
    ("from torch.nn.functional import *\n", "import the names you use"),
    ("def f(x):\n    return [np][0]\n", "np.name"),
])
def test_other_refusals_say_what_to_do(source, words):
    found = refused(source)
    assert found and any(words in v for v in found), found


def test_a_refusal_names_its_cell_its_line_and_the_fix():
    (found,) = refused("import torch\n\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n")
    assert found.startswith("In the cell 'answer', line 4: `F.scaled_dot_product_attention`") and "yourself" in found


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
    "class Head(torch.nn.Module):\n    def __init__(self, w):\n        super(Head, self).__init__()\n"
    "        self.w = w\n\n    def forward(self, x):\n        return x @ self.w\n\n\ndef f(x, w):\n    return Head(w)(x)\n",
    "import functools\n\ndef logged(fn):\n    @functools.wraps(fn)\n    def inner(*args):\n"
    "        print(fn.__name__, fn.__doc__)\n        return fn(*args)\n    return inner\n\n\n@logged\ndef f(x):\n    return x\n",
    "from numpy.lib.stride_tricks import as_strided\n\ndef f(x):\n    return as_strided(x, (2, 2), x.strides)\n",
    "import numpy.lib.stride_tricks\n\ndef f(x):\n    return numpy.lib.stride_tricks.sliding_window_view(x, 2)\n",
    "def f(x, mha):\n    return x @ mha.out_proj.weight.T + mha.out_proj.bias, mha.num_heads, mha.embed_dim\n",
    "def f(x, mha):\n    return mha.out_proj(x), mha.head_dim, mha.batch_first\n",
    "def f(x, mha):\n    heads = []\n    for i in range(mha.num_heads):\n        heads.append(x[..., i])\n"
    "    return torch.stack(heads, dim=1).detach().numpy()\n",
    "xp = np\nsoftmax = torch.softmax\n\ndef f(x):\n    return softmax(torch.from_numpy(xp.asarray(x)), dim=-1)\n",
    "from dataclasses import dataclass\n\n@dataclass\nclass Sizes:\n    h: int\n    d_k: int\n\n\n"
    "def f(x):\n    s = Sizes(2, 3)\n    return x.reshape(-1, s.h, s.d_k)\n",
    "def f(x, causal):\n    match causal:\n        case True:\n            return x.tril()\n        case _:\n"
    "            return x\n",
    "def f(x):\n    try:\n        return x.T\n    except (ValueError, RuntimeError) as err:\n"
    "        raise ValueError(f'bad input: {err}') from err\n",
    "from functools import lru_cache\n\n@lru_cache\ndef mask(t_q, t_k):\n    return torch.ones(t_q, t_k).tril()\n\n"
    "def f(x, y=math.inf):\n    return {k: v for k, v in zip('ab', [x, y])}, (lambda t: t * 2)(x)\n",
    "from __future__ import annotations\n\ndef f(x: torch.Tensor) -> tuple[torch.Tensor, int]:\n"
    "    return x.to(torch.float64), x.dim()\n",
    "# Try it outside the graded function\ndef f(x):\n    return x\nprint(f(1))\nif __name__ == '__main__':\n    f(2)\n",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_code_is_not_refused(source):
    assert refused(source) == []


def test_the_reference_answers_and_the_right_styles_are_not_refused():
    notebooks = ("01_project", "02_split_heads", "03_merge_heads", "04_output_projection", "05_assembly")
    programs = [(nb, judged.reference_answers(nb)) for nb in notebooks]
    programs += [(c.notebook, judged.reference_answers(c.notebook) | {c.cell: c.code}) for c in CORRECT]
    out = {}
    for nb, answers in programs:
        cells = [{"label": "setup", "source": judged.setup_code(nb)}] + [
            {"label": cell, "source": code} for cell, code in answers.items()]
        out[f"{nb}/{sorted(answers)}"] = admission.refusals(cells)
    assert not [k for k, v in out.items() if v] and len(programs) > 50


def test_the_visible_check_resolves_names_in_the_notebook():
    namespace = {"F": F, "torch": torch, "helper": F.scaled_dot_product_attention, "d_k": 4}
    honest = "def f(x, w):\n    return F.linear(x, w) / d_k\n\nf(1, 2)\n"
    assert admission.refusals_in_cell(honest, "f", namespace) == []
    for source in ("def f(q):\n    return F.scaled_dot_product_attention(q, q, q)\n",
                   "def f(q):\n    return helper(q, q, q)\n"):
        (found,) = admission.refusals_in_cell(source, "f", namespace)
        assert str(found).startswith("In the cell 'f', line 2:")


# --- the allowlist's own edges ---------------------------------------------------------------------

def test_every_admitted_name_exists_and_none_is_attention():
    for module, names in admission.MODULES.items():
        for name in names or ():
            ok, obj = admission._member(module, name)
            assert ok, f"{module}.{name} is listed but does not resolve"
            assert "attention" not in name.lower() and "transformer" not in name.lower()


def test_no_admitted_attribute_of_an_admitted_object_is_a_module_or_a_kernel():
    """The value attributes, read on every admitted object, give nothing outside the rule's reach."""
    kernels = {id(getattr(mod, n)) for mod in (torch, F) for n in _names(mod)}
    objects = [o for o in admission._admitted_objects() if not isinstance(o, type(torch))]
    for obj in objects:
        for attr in admission.VALUE_ATTRIBUTES:
            try:
                got = getattr(obj, attr, None)
            except Exception:  # noqa: BLE001 - a property that raises on a class: nothing reached
                continue
            assert not isinstance(got, type(torch)), (obj, attr)
            assert id(got) not in kernels, (obj, attr)


# --- the verdict is decided outside the student's process ------------------------------------------

def _graded(answer: str, forge):
    """grade_notebook on exercise 5 with ``answer``, the sandbox replaced by ``forge(job)`` (what a student's
    process could send back, whatever it did to its own modules): (scores, jobs the sandbox was given)."""
    import json

    import numpy as np

    from mha_checks import hidden
    from mha_grader import judging, notebooks, sandbox

    folder = judged.REPO / "exercises" / "mha"
    release = notebooks.load_release(folder)["05_assembly"]
    nb = json.loads((folder / "05_assembly.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "multi_head_attention":
            cell["source"] = answer
    rng = np.random.default_rng(7)
    cases = {g.id: hidden.hidden_cases(g.id, rng) for g in release.grade_cells}
    jobs = []

    def run(job, limits, unsafe):
        jobs.append(job)
        return sandbox.Report(records=forge(job, cases), returncode=0)

    original, sandbox.run = sandbox.run, run
    try:
        result = judging.grade_notebook(release, nb, "", cases)
    finally:
        sandbox.run = original
    return {t["id"]: t["score"] for t in result["tests"]}, jobs


def _perfect_records(job, cases, claim: dict | None = None):
    """Records of the reference's own outcome for every case (with ``claim`` added to each outcome)."""
    from mha_checks import calling
    ns: dict = {}
    exec(judged.setup_code("05_assembly") + "\n" + judged.reference_answers("05_assembly")["multi_head_attention"], ns)
    records = []
    for test in job["tests"]:
        for i, case in enumerate(cases[test["id"]]):
            outcome = calling.call(ns["multi_head_attention"], list(case.names), case.specs())
            records.append({"test": test["id"], "case": i, "outcome": {**outcome, **(claim or {})}})
        records.append({"test": test["id"], "status": "done", "detail": 0})
    return records


@pytest.mark.parametrize("answer", [
    "def multi_head_attention(query, key, value, mha, causal=False):\n"
    "    return F.multi_head_attention_forward(query, key, value, 12, 3, mha.in_proj_weight, mha.in_proj_bias,\n"
    "                                          None, None, False, 0.0, mha.out_proj.weight, mha.out_proj.bias)\n",
    "import sys\nsys.modules['calling'].mha_stand_in = None\n\n"
    "def multi_head_attention(query, key, value, mha, causal=False):\n    return mha(query, key, value)\n",
    "torch.nn.functional.linear = torch.softmax\n\n"
    "def multi_head_attention(query, key, value, mha, causal=False):\n    return mha(query, key, value)\n",
])
def test_a_refused_notebook_scores_nothing_whatever_its_process_would_report(answer):
    scores, jobs = _graded(answer, _perfect_records)
    assert jobs == [] and set(scores.values()) == {0.0}


def test_an_admitted_notebook_is_judged_on_its_values_alone_whatever_it_claims():
    reference = judged.reference_answers("05_assembly")["multi_head_attention"]
    scores, jobs = _graded(reference, _perfect_records)
    assert len(jobs) == 1 and set(scores.values()) == {1.0}
    for claim in ({"ready_made": False}, {"ready_made": "calling the module"}):  # a field the harness never writes
        scores, _ = _graded(reference, lambda job, cases: _perfect_records(job, cases, claim))
        assert set(scores.values()) == {0.0}
    scores, _ = _graded(reference, lambda job, cases: [{"test": t["id"], "case": 0, "outcome": {"mutated": []}}
                                                       for t in job["tests"]])
    assert set(scores.values()) == {0.0}  # no values, no points


def test_the_rule_spares_a_numpy_notebook_importing_torch():
    """Exercises 1-4 run in kernels without torch: the visible check must not import it (seconds, or a
    kit without torch)."""
    import subprocess
    import sys
    code = ("import sys\nimport numpy as np\nfrom mha_checks import admission\n"
            "assert admission.refusals_in_cell('def f(x):\\n    return np.einsum(\"ij->ji\", x).T\\n', 'f', {'np': np}) == []\n"
            "assert admission.refusals([{'label': 'a', 'source': 'import numpy as np\\nx = np.ones(2).sum()\\n'}]) == []\n"
            "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=judged.REPO)


def test_no_admitted_attribute_of_a_value_reaches_a_module_a_frame_or_a_kernel():
    """The value attributes read on a sample of every kind of value the exercises handle."""
    import functools
    import inspect

    import numpy as np

    from mha_checks import calling, hidden
    mha = calling.mha_stand_in(hidden.random_mha(np.random.default_rng(0), 6, 2).spec()["$mha"])
    values = [torch.randn(2, 3), np.ones((2, 3)), np.float64(1.0), [1], {"a": 1}, "text", 1, 1.5, mha, mha.out_proj,
              torch.float32, np.dtype("f8"), torch.finfo(torch.float32), np.finfo(np.float32), torch.Size([2]),
              np.random.default_rng(0), torch.nn.Linear(2, 2), ValueError("x"), torch.device("cpu"), slice(1),
              range(3), functools.partial(abs), torch.no_grad(), torch.max(torch.ones(2, 2), 0), np.add]
    kernels = {id(getattr(mod, n)) for mod in (torch, F) for n in _names(mod)}
    for value in values:
        for attr in admission.VALUE_ATTRIBUTES:
            try:
                got = getattr(value, attr, None)
            except Exception:  # noqa: BLE001 - e.g. .grad of a tensor that has none: nothing reached
                continue
            assert not (inspect.ismodule(got) or inspect.isframe(got) or inspect.iscode(got)
                        or inspect.istraceback(got) or id(got) in kernels), (type(value), attr)


@pytest.mark.parametrize("source, admitted", [
    ("def f(x):\n    x.shape = (2, 3)\n    return x\n", True),
    ("class A:\n    def __init__(self, w):\n        self.w_q = w\n", True),
    ("def f(x):\n    C = [torch.Tensor][0]\n    C.softmax = lambda self, dim: self\n    return x\n", False),
    ("def f(x):\n    x.transpose = None\n    return x\n", False),
    ("def f(x):\n    del x.T\n", False),
    ("def f(x):\n    torch.Tensor.shape = 3\n", False),
])
def test_only_the_students_own_attributes_and_array_data_are_assigned(source, admitted):
    assert (refused(source) == []) is admitted, refused(source)


@pytest.mark.parametrize("source", [
    "from torch import nn as F\n\ndef f(q):\n    return F.scaled_dot_product_attention(q, q, q)\n",
    "import numpy as F\n\ndef f(q):\n    return F.linear(q, q)\n",
    "def f(q):\n    import torch.nn as F\n    return F.functional.scaled_dot_product_attention(q, q, q)\n",
    "del F\n\ndef f(q):\n    return F.scaled_dot_product_attention(q, q, q)\n",
])
def test_a_name_that_names_two_things_is_refused(source):
    assert refused(source)


@pytest.mark.parametrize("source", ["x = " + "-" * 5_000 + "1\n",
                                    "".join(f"y{i} = getattr\n" for i in range(2_000))])
def test_the_rules_work_is_bounded_whatever_the_cell_holds(source):
    found = refused(source)
    assert 0 < len(found) <= admission.MOST
