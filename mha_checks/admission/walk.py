"""The ready-made rule's closure, proven on the live objects: walk everything the rule admits and fail with
the path if anything forbidden is reachable.

    python -m mha_checks.admission.walk            # prints a JSON summary; exit 1 if something was found
    python -m mha_checks.admission.walk --trace FILE   # each call written to FILE before it is made (a
                                                       # crash's last line is the call that crashed it)
    python -m mha_checks.admission.walk --admit func_globals --only numpy.random   # the walk's own check

Where it starts (:func:`roots`): every admitted module member (``admitted.MODULES``); sample values
(tensors and arrays of several dtypes and layouts, argument arrays as the grader lays them out, their
scalars, dtypes, devices, sizes, generators and their bound methods, named tuples, torch's layers, the
exercises' stand-ins (5 and 6), containers, strings, numbers, iterators, exceptions that carry a module); and
everything a notebook can define (:mod:`.shapes`: classes of every admitted form, their instances,
methods, functions, generators, closures), run as the grader runs a notebook and taken as the rule takes
them: each object is walked as what the rule says it is (a value, the student's own object, a notebook
class or function), so the walk asks the rule (:meth:`.shapes.Shape.view`) at every step from such an
object, and checks the answer against the object itself.

From each object, every step the rule admits:

* on a value: every name of ``admitted.VALUE_ATTRIBUTES`` and ``__init__``; its items, read whole (every
  item of a container, up to :data:`MOST_ITEMS`); calls with a few small argument lists (tensors, arrays,
  numbers, a string; for the libraries' own functions also the notebook's objects and a dictionary or list
  they may fill, which is walked after the call): what comes back, and what is raised, is walked in turn;
* on the student's own object, a notebook class or function: every name the rule admits there (any
  public name but ``admitted.OWN_REFUSED``, the private names the notebook binds), calls and items, each
  result walked as what the rule says it is.

A step fails the walk when it reaches: a module, a module's (a function's globals') dictionary (the
notebook's own included) or the builtins', a code object, a frame or a traceback, ``eval``/``exec``/
``compile``/``__import__``/``open``/``getattr`` (and the other builtins the rule refuses), a function of a
package outside the admitted libraries (``os``, ``sys``, ``pickle``...), raw pointers (ctypes objects,
capsules), memory that is read-only underneath (a memoryview or array over a bytes object or a NumPy
scalar, which ``torch.from_numpy`` would hand back writable), or a ready-made attention (torch's attention
under any name, ``torch._C``, ``torch.ops``; exercises 6 and 7's ready-made answers, ``mha_lib.decoder`` and
``torch.nn.attention`` with its bottom-right causal mask); and, of the notebook's objects, when a notebook class, or a
function whose ``self``, ``cls`` or parameter the rule trusts, is reached as a value (its methods could
then be called on any object), or when the rule takes an object for the student's own (or a notebook
class) and it is not. The shapes' code checks the last claim where it runs too: every binding the rule
trusts (``self``, a parameter, a loop's target) calls a guard that records what it was given, so a call
the walk makes through any library machinery that hands a foreign object to the student's code fails the
walk with the call's path. What of the libraries holds a reference to a notebook class or trusted
function once the shapes ran (dataclass fields, annotations, typing objects, wrappers, descriptors), and
whether the walk reached each holder, is reported (``holders``).

Objects are deduplicated by what determines their attributes (a type, a layout, a dtype), so the walk
ends; it runs in a subprocess of the test because calling every admitted function changes process-wide
settings (default dtype, seeds, thread counts).
"""
import argparse
import ast
import builtins
import collections
import contextlib
import dataclasses
import functools
import gc
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
from mha_checks.admission import admitted, shapes  # noqa: E402

MAX_DEPTH = 6
MOST_ITEMS = 1000     # items read of one container (a longer one is read this far)
TRACE = None          # a file each call is written to before it is made
EXTRA: list[str] = []  # names admitted on values for this walk only (to show it finds a leak)
ATTENTION = re.compile(r"attention|transformer|multi_?head|sdpa|flash|_attn", re.I)
REFUSED_BUILTINS = ("eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr", "vars",
                    "globals", "locals", "breakpoint", "input", "id", "memoryview", "type", "help")
ADMITTED_PACKAGES = {"torch", "numpy", "builtins", "math", "itertools", "functools", "collections", "typing",
                     "dataclasses", "operator", "time", "random", "warnings", "mha_checks", "__main__", "copy",
                     "abc", "enum", "contextlib", "typing_extensions", "weakref", "numbers", "copyreg"}
VALUE_NAMES = sorted(admitted.VALUE_ATTRIBUTES) + ["__init__"]
NOTEBOOK = shapes.Notebook()
NAMESPACES: dict[int, str] = {}  # the shapes' namespaces and their builtins: reaching one is reaching globals


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
    if kind is dict and (obj is vars(builtins) or _module_dict(obj) or id(obj) in NAMESPACES):
        return "a module's dictionary (a function's globals)"
    if kind.__name__ == "PyCapsule" or isinstance(obj, CTYPES._SimpleCData | CTYPES._Pointer | CTYPES.Structure
                                                   | CTYPES.Array | CTYPES.Union):
        return f"a raw pointer ({kind.__name__})"
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType) and not _bound_to_value(obj):
        home = str(getattr(obj, "__module__", "") or "")
        top = home.split(".")[0].lstrip("_")
        if home and home != "__main__" and top not in ADMITTED_PACKAGES:
            return f"a function of {home} ({getattr(obj, '__qualname__', '?')})"
    if isinstance(obj, memoryview | np.ndarray) and _read_only_underneath(obj):
        return f"memory that is read-only underneath ({_root(obj)})"
    return None


def _module_dict(d: dict) -> bool:
    name = d.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is d


def _bound_to_value(obj) -> bool:
    owner = getattr(obj, "__self__", None)
    return owner is not None and not isinstance(owner, types.ModuleType)


def _root(obj) -> str:
    """What owns the memory under an array or a memoryview, by type."""
    while True:
        if isinstance(obj, np.ndarray) and obj.base is not None:
            obj = obj.base
        elif isinstance(obj, memoryview):
            obj = obj.obj
        else:
            return type(obj).__name__


def _read_only_underneath(obj) -> bool:
    """Is the memory under ``obj`` (a memoryview, or an array, through its bases) memory that must not
    change: a bytes object's, a NumPy scalar's, or a buffer exported read-only? (Memory NumPy or torch
    allocated, a bytearray's or a writable mmap's may be written, even through a view flagged read-only.)"""
    while True:
        if isinstance(obj, np.ndarray):
            if obj.base is None:
                return False  # (NumPy's own allocation)
            obj = obj.base
        elif isinstance(obj, memoryview):
            if obj.readonly and not isinstance(obj.obj, np.ndarray | memoryview):
                return True
            obj = obj.obj
        else:
            return isinstance(obj, bytes | str | np.generic)


def notebook_value(obj) -> str | None:
    """Why ``obj``, reached as a value, breaks the rule's trust in the notebook's own objects, or None: a
    notebook class (its methods could then be called with any object as ``self``), a function whose
    ``self``, ``cls`` or parameter the rule trusts, or such a method bound to an object it does not trust."""
    if NOTEBOOK.is_class(obj):
        return f"a notebook class as a value ({obj.__qualname__})"
    fn, owner = (obj.__func__, obj.__self__) if isinstance(obj, types.MethodType) else (obj, None)
    for shape in NOTEBOOK.shapes:
        key = shape.function_key(fn)
        trusted = shape.trusted.get(key) if key else None
        if not trusted:
            continue
        if owner is None:
            return f"a notebook function the rule trusts, as a value ({fn.__qualname__})"
        for position, expect, class_key in trusted:
            if position == 0 and expect in ("self", "class"):
                classes = tuple(NOTEBOOK.classes.get((shape.name, *class_key), ())) if class_key else ()
                fits = isinstance(owner, classes) if expect == "self" else (
                    isinstance(owner, type) and issubclass(owner, classes))
                if not fits:
                    return f"a notebook method bound to an object it does not trust ({fn.__qualname__})"
    return None


# --- the samples -------------------------------------------------------------------------------------

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
        ("array.argument", _argument_array()), ("array.read_only_view", np.broadcast_to(a, (2, 2, 3))),
        ("np.float64", np.float64(1.0)), ("np.int64", np.int64(2)), ("np.bool", np.bool_(True)),
        ("np.bytes_", np.bytes_(b"xy")), ("np.str_", np.str_("xy")),
        ("np.dtype", np.dtype("f8")), ("torch.dtype", torch.float32), ("torch.device", torch.device("cpu")),
        ("torch.Size", t.shape), ("torch.finfo", torch.finfo(torch.float32)), ("np.finfo", np.finfo(np.float32)),
        ("torch.max", torch.max(t, 0)), ("torch.linalg.svd", torch.linalg.svd(t)),
        ("np.random.Generator", np.random.default_rng(0)), ("np.random.RandomState", np.random.RandomState(0)),
        ("torch.Generator", torch.Generator()), ("mha", mha), ("mha.out_proj", mha.out_proj),
        ("decoder", _decoder_stand_in()),
        ("nn.Linear", nn.Linear(3, 2)), ("nn.LayerNorm", nn.LayerNorm(3)), ("nn.Dropout", nn.Dropout(0.1)),
        ("nn.ModuleList", nn.ModuleList([nn.Linear(2, 2)])), ("nn.Sequential", nn.Sequential(nn.ReLU())),
        ("nn.Embedding", nn.Embedding(3, 2)), ("generator", (i for i in range(3))), ("map", map(abs, [1])),
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


def _argument_array():
    """An array argument as the grader hands it over: a view of the memory laid out for the case."""
    specs = [calling.encode_array(np.ones((2, 3)))]
    layout = calling.Layout(bytearray(4096))
    return calling.build_argument(layout.lay_out(["x"], specs)[0], layout.view, "x")


# --- the walk ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Node:
    path: str
    obj: object
    depth: int = 0
    kind: str = "value"          # value | own | class | func: what the rule takes the object for
    shape: object = None         # (own, class, func) the shape it comes from, and
    expr: ast.expr | None = None  # the expression the rule reads there


def _key(obj):
    """What decides the objects reachable from ``obj``: objects with the same key are walked once. Besides its
    type (and layout, dtype...), what an object refers to that may differ between objects of one type: the
    classes, functions and modules it holds, directly or through what it holds (a dataclass field's type, a
    typing construct's arguments, a partial's function, the types in a tuple)."""
    kind = type(obj)
    if isinstance(obj, type | types.ModuleType | types.FunctionType) or callable(obj) and not hasattr(obj, "__self__"):
        return ("id", id(obj))
    if isinstance(obj, types.MethodType):
        return ("method", id(obj.__func__), _holds(obj.__self__))
    owner = getattr(obj, "__self__", None)
    if owner is not None and isinstance(obj, types.BuiltinMethodType | types.MethodWrapperType):
        return ("bound", type(owner), getattr(obj, "__name__", ""), _holds(owner))
    if isinstance(obj, torch.Tensor):
        return ("tensor", kind, obj.dtype, obj.layout, obj.dim() > 0, obj.requires_grad, obj.grad_fn is not None)
    if isinstance(obj, np.ndarray):
        return ("array", kind, obj.dtype.str, obj.dtype.names, obj.ndim > 0, obj.base is None, obj.flags.writeable,
                _holds(obj) if obj.dtype.hasobject else None)
    if isinstance(obj, list | tuple | set | frozenset | collections.deque):
        return ("items", kind, tuple(sorted({type(v).__name__ for v in _whole(obj)})), _holds(obj))
    if isinstance(obj, dict):
        return ("mapping", kind, tuple(sorted({type(v).__name__ for v in _whole(obj.values())})), _holds(obj))
    if isinstance(obj, BaseException):
        return ("exception", kind, tuple(type(a).__name__ for a in obj.args[:4]), _holds(obj))
    if isinstance(obj, str | bytes | int | float | complex | bool | np.generic) or obj is None:
        return ("type", kind)
    return ("type", kind, _holds(obj))


def _holds(obj, hops: int = 3) -> frozenset:
    """The ids of what ``obj`` refers to within ``hops`` references (through containers and plain objects,
    not into classes, functions or modules themselves) that two objects of one type may differ by and that
    the walk must then follow in each: a notebook class or function, a module, a builtin the rule refuses."""
    found, todo, seen = set(), [obj], {id(obj)}
    for _ in range(hops):
        later = []
        for held in todo:
            for ref in gc.get_referents(held)[:256]:
                if id(ref) in seen or ref is type(held):
                    continue
                seen.add(id(ref))
                if isinstance(ref, type | types.FunctionType | types.BuiltinFunctionType | types.ModuleType):
                    if isinstance(ref, types.ModuleType) or id(ref) in FORBIDDEN_BUILTINS or NOTEBOOK.is_class(ref) \
                            or isinstance(ref, types.FunctionType) and ref.__code__.co_filename.startswith("<shape"):
                        found.add(id(ref))
                elif not isinstance(ref, str | bytes | int | float | torch.Tensor | np.ndarray):
                    later.append(ref)
        todo = later
    return frozenset(found)


def _whole(iterable) -> list:
    out = []
    for item in iterable:
        out.append(item)
        if len(out) >= MOST_ITEMS:
            break
    return out


@functools.cache
def _not_called_ids() -> frozenset:
    return frozenset(id(getattr(__import__(m, fromlist=["_"]), n)) for m, names in admitted.NOT_CALLED.items()
                     for n in names)


def _not_called(obj) -> bool:
    return id(obj) in _not_called_ids()


def _argument_lists():
    return [(), (torch.ones(2, 3),), (np.ones((2, 3)),), (torch.ones(2, 3), torch.ones(3, 2)),
            (np.ones((2, 3)), np.ones((3, 2))), (2,), (2, 3), (torch.ones(2, 3), 0), (np.ones((2, 3)), 0), ("a",)]


@functools.cache
def _notebook_argument_lists():
    """What a graded function may hand a library function of its own: an object of its own (one of each kind
    of class: plain, layer, dataclass, exception...), with a container for the function to fill (deepcopy's
    memo), a function of its own, a list of its own objects."""
    forms = next(s for s in NOTEBOOK.shapes if s.name == "forms").namespace
    own = [forms[n] for n in ("deep", "layer", "rebuilt", "raised_own", "pair", "config", "own_tensor", "caught")
           if n in forms]
    return [(o,) for o in own] + [(o, {}) for o in own] + [(own,), (forms["lam"], own)]


def _items(obj) -> list:
    """Every item of a container (up to MOST_ITEMS), the rows of a tensor or an array, an iterator's items."""
    if isinstance(obj, str | bytes | types.ModuleType | type):
        return []
    if isinstance(obj, dict):
        return _whole(obj.values()) + _whole(obj.keys())
    if isinstance(obj, torch.Tensor | np.ndarray):
        return [obj[0]] if obj.ndim > 0 and len(obj) else []
    if isinstance(obj, list | tuple | collections.deque | set | frozenset):
        return _whole(obj)
    if isinstance(obj, types.GeneratorType) or hasattr(obj, "__next__") or hasattr(obj, "__iter__"):
        try:
            return _whole(iter(obj))
        except Exception:  # noqa: BLE001 - an empty or failing iterator has no item to reach
            return []
    return []


def _call(obj, args):
    try:
        return obj(*args)
    except BaseException as err:  # noqa: BLE001 - what is raised is caught by the student too
        if isinstance(err, KeyboardInterrupt):
            raise
        return err


def _value_steps(node: Node, steps: list) -> None:
    obj, path, depth = node.obj, node.path, node.depth + 1
    if not isinstance(obj, types.ModuleType):
        for name in (VALUE_NAMES if not NOTEBOOK.is_own(obj) else VALUE_NAMES[:-1]) + EXTRA:  # (no __init__ of a
            #                                                                         notebook object: refused)
            try:
                steps.append(Node(f"{path}.{name}", getattr(obj, name), depth))
            except Exception:  # noqa: BLE001 - a property that raises reaches nothing
                continue
    try:
        items = _items(obj)
    except Exception:  # noqa: BLE001 - no item to reach
        items = []
    steps += [Node(f"{path}[{i}]", item, depth) for i, item in enumerate(items)]
    if callable(obj) and not _not_called(obj) and not isinstance(obj, types.ModuleType):
        lists = _argument_lists() + (_notebook_argument_lists() if node.depth == 0 else [])
        for args in lists:
            described = ", ".join(type(a).__name__ for a in args)
            if TRACE:
                TRACE.write(f"{path}({described})\n")
                TRACE.flush()
            NOTEBOOK.where = f"{path}({described})"
            steps.append(Node(f"{path}({described})", _call(obj, args), depth))
            steps += [Node(f"{path}({described}) -> argument {i}", a, depth) for i, a in enumerate(args)
                      if isinstance(a, dict | list)]


def _rule_steps(node: Node, steps: list) -> None:
    """From an object the rule takes for the student's own, a notebook class or function: every name, call
    and item the rule admits there, each taken as what the rule says it is."""
    obj, shape, depth = node.obj, node.shape, node.depth + 1
    private = shape.rule.private_names()
    names = [n for n in _dir(obj) if (not n.startswith("_") and n not in admitted.OWN_REFUSED) or n in private]
    for name in names:
        expr = ast.Attribute(node.expr, name, ast.Load())
        admits, kind = shape.view(expr)
        if admits:
            try:
                value = getattr(obj, name)
            except Exception:  # noqa: BLE001 - a property that raises reaches nothing
                continue
            steps.append(_ruled(f"{node.path}.{name}", value, depth, kind, shape, expr))
    if callable(obj) and not _trusting(node):
        expr = ast.Call(node.expr, [], [])
        admits, kind = shape.view(expr)
        if admits:
            for args in _argument_lists():
                NOTEBOOK.where = f"{node.path}({', '.join(type(a).__name__ for a in args)})"
                steps.append(_ruled(NOTEBOOK.where, _call(obj, args), depth, kind, shape, expr))
    try:
        items = _items(obj) if isinstance(obj, list | tuple | dict) else []
    except Exception:  # noqa: BLE001 - no item to reach
        items = []
    steps += [Node(f"{node.path}[{i}]", item, depth) for i, item in enumerate(items)]
    if node.kind == "own" and hasattr(type(obj), "__getitem__"):  # an item and a slice (a container layer's
        for index in (0, slice(0, 1)):                             # slice is built by calling its class)
            NOTEBOOK.where = f"{node.path}[{index}]"
            steps.append(Node(NOTEBOOK.where, _call(lambda: obj[index], ()), depth))
    if node.kind == "own":
        _set_attributes(obj, names)


FOREIGN = (np.ones(3),)  # what the walk stores on the student's own objects (the rule admits any value there)


def _set_attributes(obj, names: list[str]) -> None:
    """The student may set any attribute of an own object to any value (its fields, an exception's ``args``):
    the walk does, so that what the libraries later do with the object (copy it, build it again) sees what a
    notebook could have put there."""
    for name in names:
        try:
            if not callable(getattr(obj, name)):
                setattr(obj, name, FOREIGN)
        except Exception:  # noqa: BLE001 - read-only, or refused by the object
            continue


def _dir(obj) -> list[str]:
    try:
        return dir(obj)
    except Exception:  # noqa: BLE001 - an object half built (a layer whose __init__ did not run): its type's
        return sorted(set(dir(type(obj))) | set(getattr(obj, "__dict__", {})))  # names and its own


def _trusting(node: Node) -> bool:
    """Does the rule trust what every call of this notebook function (or class: its __init__) passes? Then the
    notebook calls it only as written (another call would end that trust): the walk does not call it."""
    fn = vars(node.obj).get("__init__") if node.kind == "class" else node.obj
    return node.shape.trusts_arguments(fn)


def _ruled(path: str, obj, depth: int, kind, shape, expr) -> Node:
    tag = kind.tag if kind.tag in ("own", "class", "func") else "value"
    return Node(path, obj, depth, tag, shape, expr)


def _misjudged(node: Node) -> str | None:
    """Where the rule's word on a notebook object is not what the object is."""
    if node.kind == "own" and not NOTEBOOK.is_own(node.obj) and not isinstance(node.obj, BaseException):
        return f"the rule takes {type(node.obj).__name__} for the student's own object"
    if node.kind == "class" and not NOTEBOOK.is_class(node.obj):
        return f"the rule takes {type(node.obj).__name__} for a notebook class"
    if node.kind == "value":
        return notebook_value(node.obj)
    return None


def walk(roots: list[Node]) -> dict:
    start = time.monotonic()
    queue = collections.deque(roots)
    gc.freeze()
    keep, seen, found, calls = [], set(), {}, 0
    while queue:
        node = queue.popleft()
        why = forbidden(node.obj) or _misjudged(node)
        if why:
            found.setdefault(why, node.path)
            continue
        try:
            key = (node.kind, _key(node.obj) if node.kind == "value" else id(node.obj))
        except Exception:  # noqa: BLE001 - an object that refuses to describe itself: walked by its type
            key = (node.kind, "type", type(node.obj))
        if key in seen or node.depth >= MAX_DEPTH:
            continue
        seen.add(key)
        keep.append(node.obj)  # (alive, so that no id is reused while the walk runs)
        if len(keep) % 1000 == 0:
            gc.freeze()  # (what is kept is never garbage: numpy.testing's gc.collect() need not scan it again)
        steps: list[Node] = []
        (_value_steps if node.kind == "value" else _rule_steps)(node, steps)
        calls += sum(1 for s in steps if s.path.endswith(")"))
        queue.extend(steps)
    gc.unfreeze()
    for where, what in NOTEBOOK.broken:
        found.setdefault(what, where)
    return {"found": found, "objects": len(seen), "calls": calls, "seconds": round(time.monotonic() - start, 1),
            "reached": {id(o) for o in keep}}


# --- where it starts ---------------------------------------------------------------------------------------

def module_roots() -> list[Node]:
    out = []
    for module, names in admitted.MODULES.items():
        mod = __import__(module, fromlist=["_"])
        for name in (names if names is not None else [n for n in dir(mod) if not n.startswith("_")]):
            obj = getattr(mod, name, None)
            if obj is not None and not isinstance(obj, types.ModuleType):
                out.append(Node(f"{module}.{name}", obj))
    return out


def notebook_roots() -> list[Node]:
    """Every shape run (:func:`.shapes.run_shapes`), and each name its admitted statements bind at the top
    level, taken as the rule takes that name there."""
    out = []
    for shape in shapes.run_shapes(NOTEBOOK):
        NAMESPACES[id(shape.namespace)] = shape.name
        NAMESPACES[id(shape.namespace["__builtins__"])] = shape.name
        bound = set().union(*(shape.program.binds[i] for i in range(len(shape.program.statements))
                              if i not in shape.refused))
        for name in sorted(bound):
            if name not in shape.namespace:
                continue
            expr = ast.Name(name, ast.Load())
            admits, kind = shape.view(expr)
            if admits and kind.tag != "static" and not (kind.tag == "func" and shape.trusts_arguments(
                    shape.namespace[name])):  # (read but to be called, it would not be trusted)
                out.append(_ruled(f"{shape.name}: {name}", shape.namespace[name], 0, kind, shape, expr))
    return out


def roots() -> list[Node]:
    """Where the walk starts: the notebook's objects first (running the shapes records their classes), then
    every admitted module member and the samples (values of every kind the rule admits attributes on)."""
    notebook = notebook_roots()
    return notebook + module_roots() + [Node(path, obj) for path, obj in samples()]


def holders(reached: set) -> dict:
    """{type: [held, reached by the walk]} of the library objects that hold a reference to a notebook class
    or to a function whose parameters the rule trusts, after the shapes ran (the notebook's own objects,
    namespaces, the walk's own records and the classes' dictionaries and bases left out)."""
    targets = list(NOTEBOOK.every_class) + [
        value for value in gc.get_objects() if isinstance(value, types.FunctionType)
        and any(shape.trusted.get(shape.function_key(value)) for shape in NOTEBOOK.shapes)]
    ignore = {id(targets), id(NOTEBOOK.every_class), id(NOTEBOOK.classes), *NAMESPACES,
              *(id(v) for v in NOTEBOOK.classes.values())}
    ignore |= {id(vars(c)) for c in NOTEBOOK.every_class}
    out: dict[str, list] = {}
    for target in targets:
        for holder in gc.get_referrers(target):
            if id(holder) in ignore or holder is targets or NOTEBOOK.is_own(holder) or NOTEBOOK.is_class(holder) \
                    or isinstance(holder, types.FrameType | types.MethodType | types.CellType) \
                    or (isinstance(holder, tuple) and any(NOTEBOOK.is_class(h) for h in holder)) \
                    or (isinstance(holder, types.FunctionType) and any(s.function_key(holder) for s in NOTEBOOK.shapes)):
                continue
            entry = out.setdefault(type(holder).__qualname__, [0, 0])
            entry[0] += 1
            entry[1] += id(holder) in reached
    return dict(sorted(out.items()))


def main() -> int:
    global TRACE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="write each call to this file before making it")
    parser.add_argument("--admit", action="append", default=[], help="also admit this attribute name")
    parser.add_argument("--only", action="append", default=[],
                        help="start only from the roots whose path starts with this (may be given again)")
    options = parser.parse_args()
    TRACE = open(options.trace, "w") if options.trace else None
    EXTRA.extend(options.admit)
    warnings.simplefilter("ignore")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        start = [r for r in roots() if not options.only or r.path.startswith(tuple(options.only))]
        result = walk(start)
        held = holders(result.pop("reached"))
    result["shapes"] = {s.name: {"refused statements": len(s.refused), "failed": s.failed[:3]}
                        for s in NOTEBOOK.shapes if s.refused or s.failed}
    result["holders"] = held
    print(json.dumps(result, indent=1))
    return 1 if result["found"] else 0


if __name__ == "__main__":
    sys.exit(main())
