"""mha_checks.admission, the ready-made rule: every attention kernel torch exposes is refused under
every spelling tried (aliases, re-exports through admitted modules, strings, star imports, match
patterns, class bodies, private kernels); Python's scoping is followed exactly (global/nonlocal,
class bodies, comprehensions, decorators, defaults, match); the student's own objects are known
by analysis, never by a name being "on no known type"; only what the graded functions reach runs
and is judged, in one pass; no honest style is refused (the reference answers, the right-answer
catalogue, the styles listed below). The closure of what is admitted: test_admission_closure.py."""
import json

import pytest
import torch
import torch.nn.functional as F

from mha_checks import admission
from mha_grader.trusted import frames
from submissions import judged, kit
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
    ],
    "gaps of issue 25 (global/nonlocal, names on no known type, dunder bindings, raw memory)": [
        "def f(x):\n    global eval\n    return eval('1')\n",
        "class A:\n    def eval(self):\n        return 1\n\n\ndef f(x):\n    return eval('1')\n",
        "def f(x):\n    def g():\n        nonlocal x\n        x = exec\n    return exec('1')\n",
        "def f(x):\n    return np.random.seed.func_globals\n",
        "def f(x):\n    return np.random.default_rng(0).normal.func_globals\n",
        "def f(x, s=np.random.seed):\n    return s.func_globals\n",
        "def f(x):\n    match np.random.seed:\n        case object(func_globals=g):\n            return g\n",
        "class A:\n    def __init__(self):\n        self.func_globals = 1\n\n\ndef f(x):\n    return np.random.seed.func_globals\n",
        "import torch as __builtins__\n",
        "from torch import nn as __builtins__\n",
        "def f(x):\n    global __builtins__\n    __builtins__ = {}\n",
        "def f(x):\n    return np.lib.stride_tricks.as_strided(x, (2,), (8,))\n",
        "from numpy.lib.stride_tricks import as_strided\n\ndef f(x):\n    return as_strided(x, (2, 2), x.strides)\n",
        "def f(x):\n    return np.ndarray((2,), buffer=x)\n",
        "buf = np.ndarray\n\ndef f(x):\n    return buf((2,), buffer=x)\n",
        "def f(x):\n    return id(x)\n",
        "def f(x):\n    return np.frombuffer(x)\n",
        "def f(x):\n    return x.numpy().ctypes\n",
        "def f(x):\n    return np.random.Generator.normal(x, 1.0)\n",  # a Cython method on another object: a crash
        "def f(x):\n    return np.random.set_bit_generator(x)\n",
        "def f(x):\n    return torch.get_device_module()\n",
        "def f(x):\n    try:\n        next(iter([]))\n    except StopIteration as err:\n        return err.value\n",
    ],
    "the student's own objects, known by analysis only": [
        "class A:\n    def __init__(self):\n        self.func_globals = 1\n\n    def m(self):\n        return self.func_globals\n\n\n"
        "def f(x):\n    return A.m(np.random.seed)\n",
        "class A:\n    def softmax(self):\n        return self.func_globals\n\n\ndef g(c):\n    return c.softmax(np.random.seed)\n\n\n"
        "def f(x):\n    return g(A)\n",
        "def deco(c):\n    return c\n\n\n@deco\nclass A:\n    pass\n",
        "def deco(fn):\n    return lambda *a: fn(np.random.seed)\n\n\nclass A:\n    @deco\n    def m(self):\n"
        "        return self.func_globals\n",
        "class A:\n    def m(self):\n        return self.func_globals\n\n    x = m(np.random.seed)\n",
        "class A:\n    @np.vectorize\n    def m(self):\n        return self.func_globals\n",
        "class A:\n    @classmethod\n    def make(cls):\n        return [cls]\n",
        "class A(torch.nn.Module):\n    def m(self):\n        return super(A, np.random.seed).func_globals\n",
        "class A:\n    def __init__(self, cfg):\n        self.v = cfg.func_globals\n\n\ndef f(x):\n    return A(x)\n",
        "class A:\n    def m(self):\n        self = np.random.seed\n        return self.func_globals\n",
        "class A:\n    F = torch.nn.functional\n",
        "class A:\n    pass\n\n\ndef f(x):\n    return [A]\n",
        "class A(torch.nn.Module):\n    def f(self):\n        return self.compile\n",
        "def f(x):\n    for head in [torch.nn.Linear(2, 2)]:\n        head.func_globals = 1\n",
        # (a parameter is known only from every call of a function that cannot be called otherwise)
        "def deco(fn):\n    return lambda *a: fn(np.random.seed)\n\n\n@deco\ndef g(cfg):\n    return cfg.func_globals\n\n\n"
        "class C:\n    pass\n\n\ndef f(x):\n    return g(C())\n",
        "class C:\n    def __init__(self, cfg):\n        self.v = cfg.func_globals\n\n\nAlias = C\n\n\nclass D(Alias):\n"
        "    pass\n\n\ndef f(x):\n    return C(C(None)), D(np.random.seed)\n",
        "class A:\n    m = lambda self: self.func_globals\n\n\ndef f(x):\n    return A.m(np.random.seed)\n",
        "class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.attn = B()\n"
        "        self.register_module('attn', torch.nn.Linear(2, 2))\n\n    def forward(self, x):\n"
        "        return self.attn.func_globals\n\n\nclass B(torch.nn.Module):\n    pass\n",
        "class A(np.float64):\n    pass\n",
    ],
    "own attributes the library sets, and class bodies read as Python reads them (found from outside)": [
        # a dataclass's or a NamedTuple's constructor stores whatever it is given under a field
        "from dataclasses import dataclass\n\nclass Own:\n    pass\n\n\n@dataclass\nclass Box:\n    v: object = Own()\n\n\n"
        "def f(x):\n    return Box(np.random.seed).v.func_globals\n",
        "from typing import NamedTuple\n\nclass Own:\n    pass\n\n\nclass Box(NamedTuple):\n    v: object = Own()\n\n\n"
        "def f(x):\n    return Box(np.random.seed).v.func_globals\n",
        # a library base class sets its own names (StopIteration's value), whatever the notebook sets elsewhere
        "class Own:\n    pass\n\n\nclass Z:\n    def __init__(self):\n        self.value = Own()\n\n\n"
        "class E(StopIteration):\n    pass\n\n\ndef f(x):\n    return Z(), E(np.random.seed).value.func_globals\n",
        "class Own:\n    pass\n\n\nclass Z:\n    obj = Own()\n\n\nclass E(AttributeError):\n    pass\n\n\n"
        "def f(x):\n    return E(name='n', obj=np.random.seed).obj.func_globals\n",
        # a container whose items are attributes of any name
        "class Own:\n    pass\n\n\nclass Z:\n    zzz = Own()\n\n\nclass P(torch.nn.ParameterDict):\n    pass\n\n\n"
        "def f(x):\n    return P({'zzz': np.random.seed}).zzz.func_globals\n",
        # nn.Module's own registries, written as items
        "class Own:\n    pass\n\n\nclass Z:\n    zzz = Own()\n    _modules = None\n\n\nclass M(torch.nn.Module):\n"
        "    def __init__(self, s):\n        super().__init__()\n        self._modules['zzz'] = s\n\n\n"
        "def f(x):\n    return M(np.random.seed).zzz.func_globals\n",
        # functools.wraps copies an object's attributes onto another
        "import functools\n\nclass Own:\n    pass\n\n\nclass Z:\n    pyfunc = Own()\n\n\n"
        "def f(x):\n    z = Z()\n    functools.wraps(np.vectorize(np.random.seed))(z)\n    return z.pyfunc.func_globals\n",
        # a library class's __init__ called on the student's object sets the names of its own instances
        "class Own:\n    pass\n\n\nclass Z:\n    pyfunc = Own()\n\n\n"
        "def f(x):\n    z = Z()\n    np.vectorize.__init__(z, np.random.seed)\n    return z.pyfunc.func_globals\n",
        # a class body calls the module's function before its own name of the same name is bound
        "class Own:\n    pass\n\n\ndef g(cfg):\n    return cfg.func_globals\n\n\nclass C:\n    r = g(np.random.seed)\n"
        "    g = 3\n\n\ndef f(x):\n    return g(Own()), C.r\n",
        # a name a class body binds is read there from the module (or builtins), never from the function around it
        "def f(x):\n    eval = None\n\n    class C:\n        k = eval('1')\n        eval = None\n    return C.k\n",
        # torch's old default-type setter imports any module by a dotted name
        "def f(x):\n    torch.set_default_tensor_type('os.system')\n",
    ],
    "the libraries and Python itself changed": [
        "torch.softmax = lambda x, dim: x\n",
        "class Meta(type):\n    pass\n",
        "class A(metaclass=abs):\n    pass\n",
        "class T(torch.Tensor):\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n        return func\n",
        "def __getattr__(name):\n    return name\n",
        "__builtins__ = {}\n",
        "getattr = len\n",
        "F = None\n\ndef f(x):\n    return F.linear(x, x)\n",
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
    ("import os\n", "may use only"),
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
    "from torch import as_strided\n\ndef f(x):\n    return as_strided(x, (2, 2), x.stride()), x.as_strided((2,), (1,))\n",
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
    # names that hand-typed lists missed (issue 25), and the student's own attributes and parameters
    "def f(x):\n    m = torch.ones(3, 3)\n    m.triu_(1)\n    return x.unsqueeze_(0), torch.FloatTensor([1.0]), np.fromiter(range(3), float)\n",
    "def f(x):\n    torch.testing.assert_close(x, x)\n    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    "    print('{} {:.3f}'.format(1, 2.0))\n    return x.to(device)\n",
    "class A(torch.nn.Module):\n    def __init__(self, t):\n        super().__init__()\n"
    "        self.register_buffer('mask', torch.tril(torch.ones(t, t)))\n        self.softmax = torch.nn.Softmax(-1)\n"
    "        self.dim = 3\n        self._cache = None\n\n    def forward(self, x):\n"
    "        return self.softmax(x.masked_fill(self.mask == 0, -1e9)) * self.dim, self._cache\n",
    "def f(x, type='causal', input=None, eval=False):\n    return x if type == 'causal' else -x\n",
    "from dataclasses import dataclass\n\n@dataclass\nclass Config:\n    n_head: int\n    n_embd: int\n\n\n"
    "class Attention(torch.nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
    "        self.n_head = config.n_head\n        self.c_attn = torch.nn.Linear(config.n_embd, 3 * config.n_embd)\n\n"
    "    def forward(self, x):\n        return self.c_attn(x).split(x.shape[-1], dim=2)\n\n\n"
    "def f(x):\n    return Attention(Config(2, 4))(x)\n",
    "from dataclasses import dataclass\n\n@dataclass\nclass Sizes:\n    h: int\n    d_k: int\n\n\n"
    "def split(x, sizes):\n    return x.reshape(-1, sizes.h, sizes.d_k)\n\n\ndef f(x):\n    return split(x, Sizes(2, 3))\n",
    "import time\nimport functools\n\ndef timed(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n"
    "        t = time.perf_counter()\n        out = fn(*a)\n        inner.seconds = time.perf_counter() - t\n"
    "        return out\n    return inner\n\n\n@timed\ndef f(x):\n    return x\n",
    "class A(torch.nn.Module):\n    @torch.no_grad()\n    def forward(self, x):\n        return x * self.scale\n\n"
    "    def eval(self):\n        return super().eval()\n",
    "def f(x: np.ndarray) -> np.ndarray:\n    if isinstance(x, (np.ndarray, torch.Tensor)):\n        return x\n"
    "    return np.random.default_rng(0).normal(size=3) + np.asarray(x)\n",
    "calls = 0\n\ndef f(x):\n    global calls\n    calls += 1\n    n = 0\n\n    def inc():\n        nonlocal n\n"
    "        n += 1\n    inc()\n    return x * n\n",
    "from typing import NamedTuple\n\nclass Out(NamedTuple):\n    out: torch.Tensor\n    weights: torch.Tensor\n\n\n"
    "def f(x):\n    r = Out(x, x)\n    return r.out, r.weights\n",
    "class Block(torch.nn.Module):\n    def __init__(self):\n        torch.nn.Module.__init__(self)\n"
    "        self.attn = Head()\n\n    def forward(self, x):\n        return self.attn.scale * x\n\n\n"
    "class Head(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = 2.0\n\n\n"
    "Layer = Block\n\ndef f(x):\n    return Layer()(x)\n",
    "def f(x):\n    w = torch.empty(3, 3)\n    torch.nn.init.xavier_uniform_(w)\n    return x @ w\n",
    "def f(x):\n    try:\n        return x.T\n    except AttributeError as err:\n        print(err)\n        raise\n",
    # a collections.namedtuple's fields (found refused from outside)
    "from collections import namedtuple\n\nShape = namedtuple('Shape', 'batch heads')\nPair = namedtuple('Pair', ['q', 'k'])"
    "\n\n\ndef f(x):\n    s = Shape(*x.shape[:2])\n    p = Pair(x, x)\n    match s:\n        case Shape(heads=h):\n"
    "            pass\n    return x.reshape(s.batch, s.heads, -1), p.q @ p.k.T, h\n",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_code_is_not_refused(source):
    assert refused(source) == []


def test_the_reference_answers_and_the_right_styles_are_not_refused():
    notebooks = kit.NOTEBOOKS
    programs = [(nb, judged.reference_answers(nb)) for nb in notebooks]
    programs += [(c.notebook, judged.reference_answers(c.notebook) | {c.cell: c.code}) for c in CORRECT]
    out = {}
    for nb, answers in programs:
        cells = [{"label": "setup", "source": judged.setup_code(nb)}] + [
            {"label": cell, "source": code} for cell, code in answers.items()]
        out[f"{nb}/{sorted(answers)}"] = admission.refusals(cells)
    assert not [k for k, v in out.items() if v] and len(programs) > 50


def test_the_visible_check_resolves_names_in_the_notebook():
    """Without IPython's history, the cell that defines the function, its other names found in the namespace."""
    namespace = {"F": F, "torch": torch, "helper": F.scaled_dot_product_attention, "d_k": 4}
    honest = "def f(x, w):\n    return F.linear(x, w) / d_k\n\nf(1, 2)\n"
    assert admission.visible_refusals("f", namespace, honest) == []
    for source in ("def f(q):\n    return F.scaled_dot_product_attention(q, q, q)\n",
                   "def f(q):\n    return helper(q, q, q)\n"):
        found = admission.visible_refusals("f", namespace, source)
        assert found and str(found[0]).startswith("In the cell 'f', line 2:"), found


def test_the_visible_check_reads_the_cells_the_kernel_ran_as_the_grader_reads_the_notebook():
    cells = [SETUP, "def f(q):\n    return helper(q)\n",
             "import matplotlib.pyplot as plt\nmha = torch.nn.MultiheadAttention(4, 2)\nplt.plot([1])\n",
             "def helper(q):\n    return F.scaled_dot_product_attention(q, q, q)\n"]
    found = admission.visible_refusals("f", {"In": [""] + cells})
    grader = admission.admit([{"label": f"cell [{i + 1}]", "source": c} for i, c in enumerate(cells)],
                             {"t": {"f"}}).refused["t"]
    assert [str(r) for r in found] == [str(r) for r in grader] and "(reached by f → helper)" in str(found[0])
    assert admission.visible_refusals("f", {"In": [""] + cells[:3] + ["def helper(q):\n    return q\n"]}) == []


# --- the allowlist's own edges ---------------------------------------------------------------------

def test_every_admitted_name_exists_and_none_is_attention():
    from mha_checks.admission import admitted
    from mha_checks.admission.library import member
    for module, names in admitted.MODULES.items():
        for name in names or ():
            ok, obj = member(module, name)
            assert ok, f"{module}.{name} is listed but does not resolve"
            assert "attention" not in name.lower() and "transformer" not in name.lower()
    assert not [n for n in admitted.VALUE_ATTRIBUTES if "attention" in n.lower() or n.startswith("_")]


def test_each_refused_library_name_says_its_family_reason():
    for source, words in [("def f(x):\n    return np.load('x')\n", "unpickles"),
                          ("def f(x):\n    return x.data_ptr()\n", "memory by address"),
                          ("def f(x):\n    return x.grad_fn\n", "autograd's graph"),
                          ("def f(x):\n    return torch.compile(x)\n", "compiles or traces"),
                          ("def f(x):\n    return np.random.Generator\n", "crash the process"),
                          ("def f(x):\n    return torch.Graph\n", "runtime"),
                          ("def f(x):\n    return x.register_hook(print)\n", "calls later")]:
        found = refused(source)
        assert found and words in found[0], (source, found)


# --- the verdict is decided outside the student's process ------------------------------------------

def _graded(answer: str, forge):
    """grade_notebook on exercise 5 with ``answer``, the sandbox replaced by ``forge(job)`` (what a student's
    process could send back, whatever it did to its own modules): (scores, jobs the sandbox was given)."""
    import json

    import numpy as np

    from mha_checks import hidden
    from mha_grader.trusted import judging, notebooks
    from mha_grader.walls import sandbox

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
        records.append({"test": test["id"], "status": "done", "detail": 0, "time": dict.fromkeys(frames.TIMES, 0.0)})
    return records


@pytest.mark.parametrize("answer", [
    "def multi_head_attention(query, key, value, mha, causal=False):\n"
    "    return F.multi_head_attention_forward(query, key, value, 12, 3, mha.in_proj_weight, mha.in_proj_bias,\n"
    "                                          None, None, False, 0.0, mha.out_proj.weight, mha.out_proj.bias)\n",
    "import sys\n\ndef multi_head_attention(query, key, value, mha, causal=False):\n"
    "    sys.modules['calling'].mha_stand_in = None\n    return mha(query, key, value)\n",
    "def multi_head_attention(query, key, value, mha, causal=False):\n    torch.nn.functional.linear = torch.softmax\n"
    "    return F.linear(query, mha.in_proj_weight)\n",
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
            "assert admission.visible_refusals('f', {'np': np}, 'def f(x):\\n    return np.einsum(\"ij->ji\", x).T\\n') == []\n"
            "assert admission.refusals([{'label': 'a', 'source': 'import numpy as np\\nx = np.ones(2).sum()\\n'}]) == []\n"
            "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=judged.REPO)


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


# --- what runs: only what the graded functions reach, judged per test ----------------------------------

NOTEBOOK = [
    {"label": "setup", "source": SETUP},
    {"label": "answer", "source": "def f(x):\n    return helper(x) * scale\n\nprint(f(1))\n"},
    {"label": "cell 3", "source": "import matplotlib.pyplot as plt\nimport time\n# try it: torch's own module\n"
                                  "mha = torch.nn.MultiheadAttention(4, 2)\nref = mha(x, x, x)\n"
                                  "torch.testing.assert_close(ref, ref)\nplt.plot([1, 2]); scale = 2.0\n\n"
                                  "@torch.no_grad()\ndef helper(q):\n    return q * 2\n"},
    {"label": "cell 4", "source": "def g(x):\n    return F.scaled_dot_product_attention(x, x, x)\n"},
    {"label": "cell 5", "source": "heads = []\nheads.append(3)\nstart = time.time()\n\ndef h(x):\n    return heads\n"},
]


def test_only_what_the_graded_functions_reach_runs_at_its_own_lines():
    verdict = admission.admit(NOTEBOOK, {"t_f": {"f"}, "t_g": {"g"}, "t_h": {"h"}}, trusted=1)
    assert set(verdict.refused) == {"t_g"}
    cells = {c["label"]: c["source"] for c in verdict.cells}
    assert cells["setup"] == SETUP
    assert cells["answer"].splitlines() == ["def f(x):", "    return helper(x) * scale", "", ""]
    kept = cells["cell 3"].splitlines()
    assert kept[6] == "scale = 2.0" and kept[8:11] == ["@torch.no_grad()", "def helper(q):", "    return q * 2"]
    assert not [line for line in kept if "mha" in line or "plt" in line or "assert_close" in line]
    assert "cell 4" not in cells  # g is refused: its code does not run
    assert cells["cell 5"].splitlines()[:2] == ["heads = []", "heads.append(3)"]  # a change of what h reads
    assert "time" not in cells["cell 5"]


def test_a_refusal_costs_only_the_tests_that_reach_it_and_says_what_reached_it():
    cells = NOTEBOOK[:2] + [{"label": "cell 3", "source": "scale = 2\n\ndef helper(q):\n"
                                                         "    return F.scaled_dot_product_attention(q, q, q)\n"},
                            {"label": "cell 4", "source": "def g(x):\n    return x\n"}]
    verdict = admission.admit(cells, {"t_f": {"f"}, "t_g": {"g"}}, trusted=1)
    (found,) = verdict.refused["t_f"]
    assert str(found).startswith("In the cell 'cell 3', line 4: `F.scaled_dot_product_attention` is torch's own "
                                 "attention") and str(found).endswith("(reached by f → helper)")
    assert "t_g" not in verdict.refused and "def g(x):" in verdict.cells[-1]["source"]
    assert "helper" not in "".join(c["source"] for c in verdict.cells)


@pytest.mark.parametrize("source, admitted", [
    ("def f(x):\n    return y\n\ny = 1\nimport os\n", True),            # the import is not reached
    ("def f(x):\n    return os.getcwd()\n\nimport os\n", False),        # it is
    ("def f(x):\n    return y\n\ny = getattr\n", False),
    ("def f(x):\n    def y():\n        return 1\n    return y()\n\ny = getattr\n", True),  # y is local to f
    ("def f(x):\n    return [y for y in x]\n\ny = getattr\n", True),      # the comprehension's own y
    ("def f(x):\n    return g()\n\ndef g():\n    return y\n\ny = getattr\n", False),
    ("class A:\n    y = 1\n\n    def m(self):\n        return y.func_globals\n\n\ndef f(x):\n    return A().m()\n", True),
    # (a method does not see its class's names: its y is the module's, bound nowhere, a NameError)
    ("def f(x):\n    global y\n    return y\n\ndef g():\n    global y\n    y = eval\n", False),
    ("def f(x, k=np.load):\n    return x\n", False),                      # a default is evaluated
    ("@np.load\ndef f(x):\n    return x\n", False),                        # a decorator too
    ("def f(x):\n    match x:\n        case {'k': np.random.seed}:\n            return 1\n", True),
    ("def f(x):\n    return x\n\nnp.allclose = len\n", True),        # changes np, which f does not read
    ("def f(x):\n    return np.allclose(x, x)\n\nnp.allclose = len\n", False),  # it does
    # a free cell's star import of a module the exercises do not admit leaves the builtins as they are
    ("def f(x):\n    return len(x), range(2)\n\nfrom pylab import *\nplot([1, 2])\n", True),
    ("def f(x):\n    return exp(x)\n\nfrom pylab import *\n", False),   # exp: bound only by it
    ("def f(x):\n    return max(x)\n\nfrom torch import *\n", False),  # torch's max, refused with its reason
    # namedtuple fields are items; anything else on the record is what a tuple has
    ("from collections import namedtuple\nS = namedtuple('S', 'a')\n\ndef f(x):\n    return S(x).func_globals\n", False),
    ("from collections import namedtuple\nS = namedtuple('S', 'a')\n\ndef f(x):\n    S.a = np.load\n", False),
    ("from collections import namedtuple\nS = namedtuple('S', 'zz')\nS = 3\n\ndef f(x):\n    return S(x).zz\n", False),
])
def test_reach_and_scoping_follow_python(source, admitted):
    found = admission.refusals([{"label": "setup", "source": SETUP}, {"label": "answer", "source": source}], {"f"})
    assert (found == []) is admitted, found


def test_selecting_a_large_free_cell_is_linear():
    """Issue 26: definitions_only was quadratic in a cell's statements (a 49 kB free cell cost 30 s).
    Selection is one pass; a cell of 10x the statements costs about 10x, not 100x. Cost is counted as the
    Python and C calls the rule makes (the same on a quiet or a busy machine), not timed."""
    import sys

    def cost(n: int) -> int:
        free = "".join(f"plt.plot([{i}, {i + 1}]); x{i} = np.ones({i % 7 + 1})\nprint(x{i}.sum())\n" for i in range(n))
        cells = NOTEBOOK[:2] + [{"label": "cell 3", "source": "import matplotlib.pyplot as plt\nscale = 2\n"
                                                              "def helper(q):\n    return q\n" + free}]
        admission.admit(cells, {"t": {"f"}}, trusted=1)  # (warm: caches filled once, as in a grading run)
        calls = 0

        def count(frame, event, arg):
            nonlocal calls
            calls += event in ("call", "c_call")

        sys.setprofile(count)
        try:
            verdict = admission.admit(cells, {"t": {"f"}}, trusted=1)
        finally:
            sys.setprofile(None)
        assert verdict.refused == {} and "x1 =" not in verdict.cells[-1]["source"], verdict
        return calls

    small, large = cost(300), cost(3000)  # (3,000 lines: ~100 kB, the largest code cell a notebook may hold)
    assert large < 20 * small, (small, large)  # (quadratic: ~100x; seconds: bench/bench_grading.py)


# --- issue 36: the prompts say what the rule refuses that an honest student may reach for ------------------

PROMPTED = {  # what a prompt names -> code that uses it (the rule must refuse it), what it suggests instead
    "np.lib.stride_tricks.as_strided": ("np.lib.stride_tricks.as_strided(x, (2,), (8,))", ("reshape",)),
    "np.frombuffer": ("np.frombuffer(b'ab', dtype=np.uint8)", ("reshape",)),
    "`.data`": ("x.data", ("the array itself", "t.detach()")),
    "np.bmat": ("np.bmat('x')", ("np.concatenate",)),
    "np.r_": ("np.r_[x, x]", ("np.block",)),
    "getattr": ("getattr(x, 'T')", ("write the attribute",)),
    "dataclasses.field(...)": ("dataclasses.field(default=0)", ("@dataclass",)),
}


@pytest.mark.parametrize("notebook", ["01_project", "02_split_heads", "03_merge_heads", "04_output_projection",
                                      "05_assembly"])
def test_each_prompt_says_what_the_rule_refuses_and_what_to_write_instead(notebook):
    """Issue 36: honest NumPy as_strided cost a whole function with no word of it in the prompts. Each released
    notebook's prompt names what the rule refuses that honest code reaches for, with what to write instead,
    and the rule does refuse each (the prompt cannot go stale)."""
    cells = json.loads((judged.REPO / "exercises" / "mha" / f"{notebook}.ipynb").read_text())["cells"]
    prompt = " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())
    names = [n for n in PROMPTED if n.strip("`") in prompt and (notebook != "05_assembly" or n not in (
        "np.bmat", "np.r_"))]
    assert "The grader runs only what your function" in prompt and len(names) >= 5, (notebook, names)
    for name in names:
        code, instead = PROMPTED[name]
        assert any(words in prompt for words in instead), (notebook, name, instead)
        found = admission.refusals([{"label": "c", "source": "import dataclasses\nimport numpy as np\n\n\n"
                                     f"def f(x):\n    return {code}\n"}], {"f"})
        assert found, (name, code)
