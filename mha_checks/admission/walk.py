"""The ready-made rule's closure, proven on the live objects: walk everything the rule admits and fail with
the path if anything forbidden is reachable.

    python -m mha_checks.admission.walk            # prints a JSON summary; exit 1 if something was found
    python -m mha_checks.admission.walk --trace FILE   # each call written to FILE before it is made (a
                                                       # crash's last line is the call that crashed it)
    python -m mha_checks.admission.walk --admit func_globals --only numpy.random   # the walk's own check

Start from every admitted module member (``admitted.MODULES``) and from sample values (tensors and arrays
of several dtypes and layouts, their scalars, dtypes, devices, sizes, generators and their bound methods,
named tuples, torch's layers, the exercises' stand-ins (5 and 6), containers, strings, numbers, iterators, exceptions
that carry a module, the student's own objects). From each object, follow every step the rule admits:

* every name of ``admitted.VALUE_ATTRIBUTES`` (the rule admits each on any value; on the student's own
  objects, every public name but ``admitted.OWN_REFUSED``), and ``__init__``;
* items (of containers, tensors, arrays, iterators);
* calls, with a few small argument lists (tensors, arrays, numbers, a string) - what comes back, and what
  is raised, is walked in turn; so the values of every type an admitted call returns are reached.

A step is forbidden when it reaches: a module, a module's (a function's globals') dictionary or the
builtins', a code object, a frame or a traceback, ``eval``/``exec``/``compile``/``__import__``/``open``/
``getattr`` (and the other builtins the rule refuses), a function of a package outside the admitted
libraries (``os``, ``sys``, ``pickle``, ``importlib``...), raw pointers (ctypes objects, capsules), or a
ready-made attention: torch's attention under any name (``scaled_dot_product_attention``,
``multi_head_attention_forward``, the ``torch.ops.aten`` kernels, ``nn.MultiheadAttention``,
``nn.Transformer*`` and their instances), ``torch._C``, ``torch.ops``, and exercises 6 and 7's
ready-made answers: ``mha_lib.decoder`` and ``torch.nn.attention`` (a bottom-right causal mask).

Objects are deduplicated by what determines their attributes (a type, a layout, a dtype), so the walk
ends; it runs in a subprocess of the test because calling every admitted function changes process-wide
settings (default dtype, seeds, thread counts).
"""
import argparse
import builtins
import collections
import contextlib
import dataclasses
import functools
import io
import json
import re
import sys
import time
import types
import typing
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from mha_checks import calling  # noqa: E402
from mha_checks.admission import admitted  # noqa: E402

MAX_DEPTH = 6
TRACE = None          # a file each call is written to before it is made
EXTRA: list[str] = []  # names admitted on values for this walk only (to show it finds a leak)
ATTENTION = re.compile(r"attention|transformer|multi_?head|sdpa|flash|_attn", re.I)
REFUSED_BUILTINS = ("eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr", "vars",
                    "globals", "locals", "breakpoint", "input", "id", "memoryview", "type", "help")
ADMITTED_PACKAGES = {"torch", "numpy", "builtins", "math", "itertools", "functools", "collections", "typing",
                     "dataclasses", "operator", "time", "random", "warnings", "mha_checks", "__main__", "copy",
                     "abc", "enum", "contextlib", "typing_extensions", "weakref", "numbers", "copyreg"}


# --- what is forbidden -----------------------------------------------------------------------------

def _ready_made() -> dict[int, str]:
    out = {}
    for module in (torch, torch._C, torch._C._nn, torch._C._VariableFunctions, F, nn, torch.ops.aten):
        for name in dir(module):
            if ATTENTION.search(name):
                try:
                    out[id(getattr(module, name))] = f"{getattr(module, '__name__', module)}.{name}"
                except Exception:  # noqa: BLE001 - an op that fails to load is no object at all
                    pass
    out[id(torch._C)] = "torch._C"
    out[id(torch.ops)] = "torch.ops"
    # exercises 6 and 7's ready-made answers: the course's decoder (mha_lib.decoder: grouped-query causal attention,
    # its mask, its cache, its layers) and torch.nn.attention (a bottom-right causal mask, flex attention)
    from mha_lib import decoder as course_decoder
    from torch.nn import attention as nn_attention
    from torch.nn.attention import bias as attention_bias
    for module in (course_decoder, nn_attention, attention_bias):
        for name, obj in vars(module).items():
            if not name.startswith("_") and getattr(obj, "__module__", None) == module.__name__:
                out[id(obj)] = f"{module.__name__}.{name}"
        out[id(module)] = module.__name__
    return out


READY_MADE = _ready_made()
READY_MADE_TYPES = tuple(c for c in vars(nn).values() if isinstance(c, type) and ATTENTION.search(c.__name__))
FORBIDDEN_BUILTINS = {id(getattr(builtins, n)): n for n in REFUSED_BUILTINS}
CTYPES = __import__("ctypes")


def forbidden(obj) -> str | None:
    """Why reaching ``obj`` breaks the rule's closure, or None."""
    kind = type(obj)
    if isinstance(obj, types.ModuleType):
        return f"a module ({getattr(obj, '__name__', '?')})"
    if id(obj) in READY_MADE:
        return f"a ready-made attention ({READY_MADE[id(obj)]})"
    if READY_MADE_TYPES and isinstance(obj, READY_MADE_TYPES):
        return f"a ready-made attention ({kind.__name__})"
    if isinstance(obj, types.CodeType | types.FrameType | types.TracebackType):
        return f"a {kind.__name__}"
    if id(obj) in FORBIDDEN_BUILTINS:
        return f"the builtin {FORBIDDEN_BUILTINS[id(obj)]}"
    if kind is dict and (obj is vars(builtins) or _module_dict(obj)):
        return "a module's dictionary (a function's globals)"
    if kind.__name__ == "PyCapsule" or isinstance(obj, CTYPES._SimpleCData | CTYPES._Pointer | CTYPES.Structure
                                                   | CTYPES.Array | CTYPES.Union):
        return f"a raw pointer ({kind.__name__})"
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType) and not _bound_to_value(obj):
        home = str(getattr(obj, "__module__", "") or "")
        top = home.split(".")[0].lstrip("_")
        if home and home != "__main__" and top not in ADMITTED_PACKAGES:
            return f"a function of {home} ({getattr(obj, '__qualname__', '?')})"
    return None


def _module_dict(d: dict) -> bool:
    name = d.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is d


def _bound_to_value(obj) -> bool:
    owner = getattr(obj, "__self__", None)
    return owner is not None and not isinstance(owner, types.ModuleType)


# --- the samples -------------------------------------------------------------------------------------

class OwnLayer(nn.Module):
    """A student's own layer, as the rule knows it: any public name but the library's machinery."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2, 3))
        self.lin = nn.Linear(3, 2)
        self.softmax = nn.Softmax(-1)
        self.dim = 3
        self.register_buffer("mask", torch.ones(2, 2).tril())

    def forward(self, x):
        return self.lin(x)


class OwnTensor(torch.Tensor):
    """A student's own tensor class (its instances are tensors the rule knows are the student's)."""


class OwnError(ValueError):
    """A student's own exception (what it carries is what the student's code gave it)."""


@dataclasses.dataclass
class OwnConfig:
    n_head: int = 2
    d_model: torch.Tensor = dataclasses.field(default_factory=lambda: torch.ones(2))


def own_function(x):
    return x


def _decoder_stand_in():
    """Exercise 6's decoder as a graded function receives it (two blocks; its parts are reached by the walk)."""
    def pair(*shape):
        return {"weight": calling.encode_array(np.ones(shape)), "bias": calling.encode_array(np.ones(shape[0]))}
    attn = {"embed_dim": 4, "num_heads": 2, "weights": {f"{p}_{w}": calling.encode_array(np.ones((4, 4) if w == "weight"
                                                                                              else 4))
                                                        for p in calling.PROJECTIONS for w in ("weight", "bias")}}
    layer = {"attn": attn, "norm1": pair(4), "norm2": pair(4), "linear1": pair(6, 4), "linear2": pair(4, 6)}
    return calling.decoder_stand_in({"eps": 1e-5, "layers": [layer, layer], "norm": pair(4)})


def samples() -> list[tuple[str, object]]:
    t = torch.arange(6.0).reshape(2, 3)
    leaf = torch.ones(2, 3, requires_grad=True)
    a = np.arange(6.0).reshape(2, 3)
    mha = calling.mha_stand_in({"embed_dim": 4, "num_heads": 2, "weights": {
        k: calling.encode_array(np.ones(s)) for k, s in (("in_proj_weight", (12, 4)), ("in_proj_bias", (12,)),
                                                          ("out_proj_weight", (4, 4)), ("out_proj_bias", (4,)))}})
    Pair = collections.namedtuple("Pair", "first second")
    return [
        ("tensor", t), ("tensor.float64", t.double()), ("tensor.int64", t.long()), ("tensor.bool", t > 1),
        ("tensor.complex64", t.to(torch.complex64)), ("tensor.requires_grad", leaf), ("tensor.non_leaf", leaf * 2),
        ("tensor.0d", torch.tensor(1.5)), ("tensor.empty", torch.empty(0)), ("tensor.view", t.t()),
        ("parameter", nn.Parameter(torch.ones(2))), ("tensor.sparse", t.to_sparse()),
        ("array", a), ("array.int", a.astype(np.int64)), ("array.bool", a > 1), ("array.complex", a + 1j),
        ("array.0d", np.array(1.0)), ("array.view", a.T), ("array.object", np.array([t, a, 1], dtype=object)),
        ("array.structured", np.zeros(2, dtype=[("x", "f8"), ("y", "i4")])), ("array.from_tensor", t.numpy()),
        ("np.float64", np.float64(1.0)), ("np.int64", np.int64(2)), ("np.bool", np.bool_(True)),
        ("np.dtype", np.dtype("f8")), ("torch.dtype", torch.float32), ("torch.device", torch.device("cpu")),
        ("torch.Size", t.shape), ("torch.finfo", torch.finfo(torch.float32)), ("np.finfo", np.finfo(np.float32)),
        ("torch.max", torch.max(t, 0)), ("torch.linalg.svd", torch.linalg.svd(t)),
        ("np.random.Generator", np.random.default_rng(0)), ("np.random.RandomState", np.random.RandomState(0)),
        ("torch.Generator", torch.Generator()), ("mha", mha), ("mha.out_proj", mha.out_proj),
        ("decoder", _decoder_stand_in()),
        ("nn.Linear", nn.Linear(3, 2)), ("nn.LayerNorm", nn.LayerNorm(3)), ("nn.Dropout", nn.Dropout(0.1)),
        ("nn.ModuleList", nn.ModuleList([nn.Linear(2, 2)])), ("nn.Sequential", nn.Sequential(nn.ReLU())),
        ("nn.Embedding", nn.Embedding(3, 2)), ("own layer", OwnLayer()), ("own config", OwnConfig()),
        ("own tensor", (leaf * 3).as_subclass(OwnTensor)), ("own exception", OwnError(t, a)),
        ("own function", own_function), ("generator", (i for i in range(3))), ("map", map(abs, [1])),
        ("zip", zip([1], [2])), ("enumerate", enumerate([1])), ("reversed", reversed([1, 2])),
        ("dict.keys", {"a": t}.keys()), ("dict.items", {"a": t}.items()), ("range", range(3)), ("slice", slice(1, 2)),
        ("str", "text {0}"), ("bytes", b"xy"), ("list", [t, a, 1]), ("tuple", (t, 1)), ("dict", {"k": t}),
        ("set", {1, 2}), ("frozenset", frozenset({1})), ("deque", collections.deque([t])),
        ("defaultdict", collections.defaultdict(list)), ("Counter", collections.Counter("ab")),
        ("OrderedDict", collections.OrderedDict(a=t)), ("namedtuple", Pair(t, a)),
        ("typing", typing.Optional[int]), ("partial", functools.partial(np.add, 1)), ("no_grad", torch.no_grad()),
        ("errstate", np.errstate()), ("state_dict", nn.Linear(2, 2).state_dict()),
        ("exception.obj", AttributeError("x", name="y", obj=torch)), ("exception.args", KeyError(torch)),
        ("exception.value", StopIteration(torch)), ("exception.code", SystemExit(torch)),
        ("exception.import", ImportError("x", name="torch", path="/p")), ("exception.os", OSError(2, "x", "f")),
        ("exception.unicode", UnicodeDecodeError("utf-8", b"x", 0, 1, "r")),
        ("exception.group", ExceptionGroup("g", [ValueError(torch)])), ("int", 3), ("float", 1.5), ("complex", 1j),
        ("bool", True), ("None", None),
    ]


OWN_TYPES = (OwnLayer, OwnConfig, OwnTensor, OwnError)


# --- the walk ------------------------------------------------------------------------------------------

def _key(obj):
    """What decides the objects reachable from ``obj``: objects with the same key are walked once."""
    kind = type(obj)
    if isinstance(obj, type | types.ModuleType | types.FunctionType) or callable(obj) and not hasattr(obj, "__self__"):
        return ("id", id(obj))
    if isinstance(obj, types.MethodType):
        return ("method", id(obj.__func__))
    owner = getattr(obj, "__self__", None)
    if owner is not None and isinstance(obj, types.BuiltinMethodType | types.MethodWrapperType):
        return ("bound", type(owner), getattr(obj, "__name__", ""))
    if isinstance(obj, torch.Tensor):
        return ("tensor", kind, obj.dtype, obj.layout, obj.dim() > 0, obj.requires_grad, obj.grad_fn is not None)
    if isinstance(obj, np.ndarray):
        return ("array", kind, obj.dtype.str, obj.dtype.names, obj.ndim > 0, obj.base is None)
    if isinstance(obj, list | tuple | set | frozenset | collections.deque):
        return ("items", kind, tuple(sorted({type(v).__name__ for v in list(obj)[:8]})))
    if isinstance(obj, dict):
        return ("mapping", kind, tuple(sorted({type(v).__name__ for v in list(obj.values())[:8]})))
    if isinstance(obj, BaseException):
        return ("exception", kind, tuple(type(a).__name__ for a in obj.args[:4]))
    if isinstance(obj, OWN_TYPES):
        return ("own", id(obj))
    return ("type", kind)


def _names(obj) -> list[str]:
    if isinstance(obj, OWN_TYPES):
        return [n for n in dir(obj) if not n.startswith("_") and n not in admitted.OWN_REFUSED] + ["__init__"]
    return sorted(admitted.VALUE_ATTRIBUTES) + ["__init__"] + EXTRA


def _not_called(obj) -> bool:
    return any(obj is getattr(__import__(m, fromlist=["_"]), n) for m, names in admitted.NOT_CALLED.items()
               for n in names)


def _argument_lists():
    return [(), (torch.ones(2, 3),), (np.ones((2, 3)),), (torch.ones(2, 3), torch.ones(3, 2)),
            (np.ones((2, 3)), np.ones((3, 2))), (2,), (2, 3), (torch.ones(2, 3), 0), (np.ones((2, 3)), 0), ("a",)]


def _items(obj) -> list:
    if isinstance(obj, str | bytes | types.ModuleType | type):
        return []
    if isinstance(obj, dict):
        return list(obj.values())[:4] + list(obj.keys())[:2]
    if isinstance(obj, torch.Tensor | np.ndarray):
        return [obj[0]] if obj.ndim > 0 and len(obj) else []
    if isinstance(obj, list | tuple | collections.deque):
        return list(obj)[:4]
    if isinstance(obj, types.GeneratorType) or hasattr(obj, "__next__") or hasattr(obj, "__iter__"):
        try:
            return [next(iter(obj))]
        except Exception:  # noqa: BLE001 - an empty or failing iterator has no item to reach
            return []
    return []


def walk(roots) -> dict:
    start = time.monotonic()
    queue = collections.deque((path, obj, 0) for path, obj in roots)
    keep, seen, found, calls = [], set(), {}, 0
    while queue:
        path, obj, depth = queue.popleft()
        why = forbidden(obj)
        if why:
            found.setdefault(why, path)
            continue
        try:
            key = _key(obj)
        except Exception:  # noqa: BLE001 - an object that refuses to describe itself: walked by its type
            key = ("type", type(obj))
        if key in seen or depth >= MAX_DEPTH:
            continue
        seen.add(key)
        keep.append(obj)  # (alive, so that no id is reused while the walk runs)
        if not isinstance(obj, types.ModuleType):
            for name in _names(obj):
                try:
                    value = getattr(obj, name)
                except Exception:  # noqa: BLE001 - a property that raises reaches nothing
                    continue
                queue.append((f"{path}.{name}", value, depth + 1))
        try:
            items = _items(obj)
        except Exception:  # noqa: BLE001 - no item to reach
            items = []
        for i, item in enumerate(items):
            queue.append((f"{path}[{i}]", item, depth + 1))
        if callable(obj) and not _not_called(obj) and not isinstance(obj, types.ModuleType):
            for args in _argument_lists():
                calls += 1
                if TRACE:
                    TRACE.write(f"{path}{tuple(type(a).__name__ for a in args)}\n")
                    TRACE.flush()
                try:
                    value = obj(*args)
                except BaseException as err:  # noqa: BLE001 - what is raised is caught by the student too
                    if isinstance(err, KeyboardInterrupt):
                        raise
                    value = err
                queue.append((f"{path}({', '.join(type(a).__name__ for a in args)})", value, depth + 1))
    return {"found": found, "objects": len(seen), "calls": calls, "seconds": round(time.monotonic() - start, 1)}


def roots() -> list[tuple[str, object]]:
    """Where the walk starts: every admitted module member, then :func:`samples` (values of every kind the
    rule admits attributes on, and the student's own objects as the rule knows them, ``OWN_TYPES``, whose
    names are walked as :func:`_names` says). Objects a notebook defines join the walk here."""
    out = []
    for module, names in admitted.MODULES.items():
        mod = __import__(module, fromlist=["_"])
        for name in (names if names is not None else [n for n in dir(mod) if not n.startswith("_")]):
            obj = getattr(mod, name, None)
            if obj is not None and not isinstance(obj, types.ModuleType):
                out.append((f"{module}.{name}", obj))
    return out + samples()


def main() -> int:
    global TRACE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="write each call to this file before making it")
    parser.add_argument("--admit", action="append", default=[], help="also admit this attribute name")
    parser.add_argument("--only", help="start only from the roots whose path starts with this")
    options = parser.parse_args()
    TRACE = open(options.trace, "w") if options.trace else None
    EXTRA.extend(options.admit)
    start = [r for r in roots() if not options.only or r[0].startswith(options.only)]
    warnings.simplefilter("ignore")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = walk(start)
    print(json.dumps(result, indent=1))
    return 1 if result["found"] else 0


if __name__ == "__main__":
    sys.exit(main())
