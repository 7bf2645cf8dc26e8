"""The ready-made rule: which code a graded notebook may run at all.

Theory of operation
===================

A student earns points by computing attention; a ready-made answer (torch's own attention
kernels under any of their names, the module handed to exercise 5, the course's own answers)
earns nothing. This module decides that, and it is the only place that does.

**Where it is decided.** In the trusted process, from the source alone, before the sandbox
starts: :func:`refusals` reads every cell the grader would run (the release's read-only cells,
then the student's cells), and a notebook with one refusal is not run: each of its grade cells
scores 0 with the refusals as feedback (cell, line, what to write instead). Nothing the student's
process later does, or claims, takes part in the verdict: no flag, no guard, no record.

**What is admitted: an allowlist, never a blocklist.** Each node of the syntax tree must be of
an admitted kind (:data:`SYNTAX`: definitions, assignments, loops, comprehensions, try/except,
``with``, ``match`` without positional class patterns); every other construct is refused, so a
construct added to Python later is refused until admitted here. Every expression is given one
of two kinds:

* **static**: it names a real object, resolved here by importing the admitted modules
  (:data:`MODULES`), so ``import numpy as np``, ``from torch.nn import functional as F``, a
  top-level alias ``xp = np`` and an attribute chain ``np.lib.stride_tricks.as_strided`` are
  each followed to the object they name, and each step must be on the list: a module only when
  it is an admitted module (``torch.sys``, ``typing.operator``, ``np.ctypeslib`` are not), any
  other object only when its module lists that name (``torch.ops``, ``torch._C``,
  ``F.scaled_dot_product_attention`` are not listed). An alias or a re-export is therefore
  recognised as the object it names. A module may only be the base of an attribute: it is never
  stored, passed, returned or matched, so no value ever holds a module.
* **value**: everything computed at run time (arguments, tensors, arrays, numbers, the
  student's own functions and objects). An attribute of a value is admitted when its name is on
  :data:`VALUE_ATTRIBUTES` (the maths of tensors and arrays, containers, the ``mha`` stand-in's
  weights), or when it is the student's own kind of name: public and not an attribute of any
  type a value can have (:func:`_surface`: tensors, arrays, functions, classes, frames,
  generators, exceptions, modules' own...). So ``self.w_q`` is admitted, while ``gen.gi_frame``,
  ``err.args``, ``x.grad_fn``, ``a.ctypes`` are not. No private name (``_x``) and no dunder
  except reading ``__name__``/``__qualname__``/``__doc__`` (strings) and calling ``__init__``.

Names are resolved over the whole program: a name bound only by imports or static aliases of one
object is static; a name bound otherwise (assignment, parameter, loop, ``def``...) is a value; a
name bound both ways is refused, and so is binding a builtin that is not admitted
(:data:`BUILTINS`), so a bare ``getattr`` can only ever be the builtin, which is refused. The
libraries' objects are never assigned to or deleted (``np.allclose = ...``; an attribute is
assigned only under the student's own kind of name or as an array's data (:data:`STORED`), so
``C.softmax = f`` is refused on any value), and a class takes no keywords (no metaclass) and defines no dunder but the ordinary ones
(:data:`DUNDER_DEFS`: no ``__torch_function__``, ``__getattr__``...). The builtins that turn
strings into objects (``getattr``, ``vars``, ``eval``, ``exec``, ``compile``, ``__import__``,
``globals``, ``type``...) are not admitted; ``super()`` takes zero or two arguments.

**Why nothing in the sandbox can change the verdict.** The verdict on admission is computed
before any student code runs, from the text, with objects this process imported itself. Inside
the sandbox the student receives plain values: arrays, tensors, and for exercise 5 a stand-in
(:class:`mha_checks.calling.MhaStandIn`) that holds the weights and whose call computes nothing,
so there is no guard to remove and no ready-made answer within reach of an admitted name. The
points then come only from the values the function returns, judged outside.

One admitted function is not memory-safe: NumPy's ``as_strided`` (admitted because honest code
uses it) makes views that may reach past their array, and a write through one could corrupt the
sandboxed process itself, and so in principle run code this rule does not admit. The sandbox
bounds what that process can touch, and what it returns is still judged by value; torch's
``as_strided`` and every other admitted view check their bounds.

The visible tests apply the same rule to the cell that defines the tested function
(:func:`refusals_in_cell`, names not bound there resolved in the notebook's namespace): a
courtesy to the student; the grade is the grader's.
"""
import ast
import builtins
import functools
import importlib
import sys
import types
from dataclasses import dataclass

# --- what is admitted ------------------------------------------------------------------------

_TORCH = """abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr adjoint all allclose amax amin
aminmax angle any arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort argwhere
as_strided as_tensor asarray asin asinh atan atan2 atanh atleast_1d atleast_2d atleast_3d baddbmm block_diag
bmm broadcast_shapes broadcast_tensors broadcast_to bucketize can_cast cartesian_prod cat cdist ceil chunk clamp
clamp_max clamp_min clip clone column_stack concat concatenate conj cos cosh count_nonzero cross cummax cummin
cumprod cumsum deg2rad det detach diag diag_embed diagflat diagonal diff dist div divide dot dsplit dstack
einsum empty empty_like enable_grad eq equal erf exp exp2 expm1 eye flatten flip fliplr flipud float_power floor
floor_divide fmax fmin fmod from_numpy full full_like gather ge get_default_dtype greater greater_equal gt
hsplit hstack hypot index_select inference_mode inner inverse is_complex is_floating_point is_grad_enabled
is_nonzero is_tensor isclose isfinite isinf isnan kron le lerp less less_equal linspace log log10 log1p log2
log_softmax logaddexp logical_and logical_not logical_or logical_xor logit logspace logsumexp lt manual_seed
masked_fill masked_select matmul matrix_power max maximum mean median meshgrid min minimum mm moveaxis movedim
mul multiply mv nan_to_num nanmean nansum narrow ne neg negative no_grad nonzero norm numel ones ones_like outer
permute pow prod promote_types rand rand_like randn randn_like reciprocal relu remainder repeat_interleave
reshape result_type roll rot90 round rsqrt scatter select set_grad_enabled sigmoid sign sin sinh softmax sort
split sqrt square squeeze stack std sub subtract sum swapaxes swapdims t take take_along_dim tan tanh tensor
tensor_split tensordot tile topk trace transpose tril tril_indices triu triu_indices true_divide trunc unbind
unflatten unique unsqueeze var vdot vsplit vstack where xlogy zeros zeros_like
Tensor Size device dtype finfo iinfo bool uint8 int8 int16 int32 int64 int long float16 half bfloat16 float32
float float64 double complex64 complex128 inf nan pi e"""

_NUMPY = """abs absolute add all allclose amax amin any append arange arccos arccosh arcsin arcsinh arctan arctan2
arctanh argmax argmin argsort argwhere array array_equal array_split asarray ascontiguousarray astype atleast_1d
atleast_2d atleast_3d average broadcast_arrays broadcast_shapes broadcast_to ceil clip column_stack concat
concatenate copy cos cosh count_nonzero cumprod cumsum deg2rad diag diagonal diff divide dot dsplit dstack dtype
einsum einsum_path empty empty_like equal errstate exp exp2 expand_dims expm1 eye finfo flip fliplr flipud
float_power floor floor_divide fmax fmin fmod full full_like greater greater_equal hsplit hstack hypot identity
iinfo indices inner isclose isfinite isinf isnan isscalar kron less less_equal linspace log log10 log1p log2
logaddexp logical_and logical_not logical_or logical_xor logspace matmul matrix_transpose max maximum mean median
meshgrid min minimum mod moveaxis multiply nan_to_num nanmax nanmean nanmin nansum ndim negative nonzero ones
ones_like outer pad permute_dims power prod put_along_axis ravel reciprocal remainder repeat reshape result_type
roll rollaxis rot90 round searchsorted shape sign sin sinh size sort split sqrt square squeeze stack std subtract
sum swapaxes take take_along_axis tan tanh tensordot tile trace transpose tri tril tril_indices triu triu_indices
true_divide trunc unique unravel_index var vdot vecdot vsplit vstack where zeros zeros_like
ndarray generic bool bool_ uint8 int8 int16 int32 int64 intp float16 float32 float64 longdouble complex64
complex128 inf nan pi e newaxis"""

MODULES: dict[str, frozenset | None] = {
    # module -> the names it admits (None: every public name, for modules of plain maths)
    "math": None,
    "itertools": None,
    "numpy": frozenset(_NUMPY.split()),
    "numpy.linalg": frozenset("norm inv solve det svd qr eigh eig pinv matrix_power multi_dot cholesky matmul "
                              "matrix_transpose vector_norm matrix_norm vecdot".split()),
    "numpy.lib": frozenset(),                                    # only as the way to numpy.lib.stride_tricks
    "numpy.lib.stride_tricks": frozenset({"as_strided", "sliding_window_view"}),
    "numpy.random": frozenset("default_rng seed normal randn rand standard_normal random uniform Generator".split()),
    "torch": frozenset(_TORCH.split()),
    "torch.nn": frozenset("Module Linear Parameter ModuleList ModuleDict ParameterList Sequential Softmax Dropout "
                          "Identity LayerNorm ReLU GELU".split()),
    "torch.nn.functional": frozenset("linear softmax log_softmax softmin relu gelu silu tanh sigmoid dropout pad "
                                     "normalize one_hot layer_norm softplus elu leaky_relu".split()),
    "torch.linalg": frozenset("norm vector_norm matrix_norm matmul vecdot inv solve det svd qr eigh cholesky pinv "
                              "multi_dot cross diagonal".split()),
    "typing": frozenset("Any Optional Union List Tuple Dict Sequence Callable Iterable Iterator Mapping NamedTuple "
                        "Literal TypeVar Final ClassVar TYPE_CHECKING cast".split()),
    "functools": frozenset("partial reduce wraps lru_cache cache cached_property".split()),
    "collections": frozenset("namedtuple OrderedDict defaultdict deque Counter".split()),
    "dataclasses": frozenset("dataclass field fields asdict astuple replace".split()),
}
FUTURE = {"annotations"}  # `from __future__ import annotations` (compile-time only)
COURSE = {"mha_lib", "mha_checks", "mha_grader", "mha_book"}

BUILTINS = frozenset("""abs all any bool bytes callable classmethod complex dict divmod enumerate filter float
frozenset hasattr hash id int isinstance issubclass iter len list map max min next object pow print property range
repr reversed round set slice sorted staticmethod str sum super tuple zip NotImplemented Ellipsis
""".split()) | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException | Warning)}
# (every exception class may be named, raised and caught: what an exception carries is read through
# the value attributes, where `args`, `obj`, `__traceback__` are not admitted)

VALUE_ATTRIBUTES = frozenset("""T mT abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr adjoint
all allclose amax amin aminmax angle any arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin
argpartition argsort argwhere asin asinh astype atan atan2 atanh baddbmm bfloat16 bincount bmm bool broadcast_to
byte ceil cfloat cdouble chunk clamp clamp_max clamp_min clip clone compress conj conjugate contiguous copy cos
cosh count_nonzero cpu cross cummax cummin cumprod cumsum deg2rad det detach diag diag_embed diagflat diagonal
diff dim dist div divide dot double dsplit dtype element_size eq equal erf exp exp2 expand expand_as expm1 fill
fill_diagonal flatten flip fliplr flipud float float_power floor floor_divide fmax fmin fmod frac gather ge
greater greater_equal gt half hsplit hypot imag index_add index_fill index_select inner int inverse
is_complex is_contiguous is_floating_point is_signed isclose isfinite isinf isnan item itemsize kron kthvalue le
lerp less less_equal log log10 log1p log2 log_softmax logaddexp logcumsumexp logical_and logical_not logical_or
logical_xor logit logsumexp long lt masked_fill masked_select matmul matrix_power max maximum mean median min
minimum mm moveaxis movedim msort mul multiply mv nan_to_num nanmean nansum narrow nbytes ndim ndimension ne neg
negative nelement new_empty new_full new_ones new_tensor new_zeros nonzero norm not_equal numel numpy outer
permute pow prod ravel real reciprocal relu remainder repeat repeat_interleave reshape reshape_as roll rot90
round rsqrt searchsorted select shape short sigmoid sign sin sinh size softmax sort split sqrt square squeeze
std stride strides sub subtract sum swapaxes swapdims t take take_along_dim tan tanh tensor_split tile to
tolist topk trace transpose tril triu true_divide trunc type type_as unbind unflatten unique unsqueeze values
indices var vdot view view_as vsplit where
abs_ add_ clamp_ copy_ div_ exp_ fill_ masked_fill_ mul_ sub_ zero_ requires_grad requires_grad_ grad
reduce accumulate outer at reduceat
append extend insert pop remove clear items keys get update setdefault index count reverse join strip upper
lower startswith endswith replace add discard union intersection difference appendleft popleft
real imag is_integer bit_length numerator denominator eps tiny max min bits resolution smallest_normal
in_proj_weight in_proj_bias out_proj weight bias num_heads embed_dim head_dim batch_first kdim vdim dropout
bias_k bias_v add_zero_attn in_features out_features training q_proj_weight k_proj_weight v_proj_weight
parameters named_parameters state_dict eval train modules children name data start stop step device
normal standard_normal random uniform integers choice permutation""".split())
STORED = {"shape", "data", "requires_grad", "grad"}  # data attributes of arrays and tensors a student may set
                                                     # (`x.shape = (b, t, h, d)`): a getter would get `self` only
SHADOWED = {"input", "format", "dir", "exit", "quit"}  # builtins not admitted, harmless if reached: a student
                                                       # may name a parameter so (`def f(input)`)
DUNDER_READ = {"__name__", "__qualname__", "__doc__"}
DUNDER_DEFS = frozenset("""__init__ __call__ __repr__ __str__ __len__ __getitem__ __setitem__ __iter__ __next__
__contains__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __post_init__ __add__ __radd__ __sub__
__rsub__ __mul__ __rmul__ __matmul__ __rmatmul__ __truediv__ __neg__ __enter__ __exit__""".split())

SYNTAX = (ast.Module, ast.FunctionDef, ast.ClassDef, ast.Return, ast.Delete, ast.Assign, ast.AugAssign,
          ast.AnnAssign, ast.For, ast.While, ast.If, ast.With, ast.Match, ast.Raise, ast.Try, ast.TryStar,
          ast.Assert, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Expr, ast.Pass, ast.Break,
          ast.Continue, ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set,
          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Yield, ast.YieldFrom, ast.Compare,
          ast.Call, ast.FormattedValue, ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Starred,
          ast.Name, ast.List, ast.Tuple, ast.Slice, ast.expr_context, ast.boolop, ast.operator, ast.unaryop,
          ast.cmpop, ast.comprehension, ast.ExceptHandler, ast.arguments, ast.arg, ast.keyword, ast.alias,
          ast.withitem, ast.match_case, ast.MatchValue, ast.MatchSingleton, ast.MatchSequence, ast.MatchMapping,
          ast.MatchClass, ast.MatchStar, ast.MatchAs, ast.MatchOr)

YOURSELF = "compute it yourself with @, F.linear, reshape/transpose, torch.softmax and masked_fill"
ADVICE = {
    "getattr": "write the attribute itself (mha.in_proj_weight)", "setattr": "assign the attribute itself",
    "delattr": "leave the objects you are given as they are", "vars": "write the attribute itself",
    "dir": "write the attribute itself", "globals": "use the names themselves", "locals": "use the names themselves",
    "eval": "write the code itself", "exec": "write the code itself", "compile": "write the code itself",
    "__import__": "import at the top of the cell (import numpy as np)", "type": "use isinstance(x, torch.Tensor)",
    "open": "the exercises read no files", "input": "the exercises read no input",
    "breakpoint": "remove the breakpoint", "memoryview": "use NumPy arrays or tensors",
}


@dataclass(frozen=True)
class Refusal:
    """One refused construct: the cell (its label), the line in that cell, and what to write instead."""
    cell: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"In the cell {self.cell!r}, line {self.line}: {self.text}"


def refusals(cells: list[dict]) -> list[Refusal]:
    """What the grader refuses in a program (``{"label", "source"}`` cells, run in order): empty = admitted.

    A cell with a syntax error is not analysed: it never runs (the sandbox reports its error). A
    cell too deep for this process to parse is refused: the sandbox might still compile it."""
    trees, deep = [], []
    for cell in cells:
        tree = _parse(cell["source"])
        if tree is _TOO_DEEP:
            deep.append(Refusal(cell["label"], 1, TOO_DEEP))
        elif tree is not None:
            trees.append((cell["label"], cell["source"], tree))
    return deep or _Program(trees, namespace=None).check()


def refusals_in_cell(source: str, label: str, namespace: dict) -> list[Refusal]:
    """The visible tests' view: one cell, its top-level expressions (try-it lines) left out, the names
    it does not bind resolved in the notebook's ``namespace``."""
    tree = _parse(source)
    if tree is None or tree is _TOO_DEEP:
        return [Refusal(label, 1, TOO_DEEP)] if tree is _TOO_DEEP else []
    tree.body = [s for s in tree.body if not isinstance(s, ast.Expr)]
    return _Program([(label, source, tree)], namespace=namespace).check()


def explain(found: list[Refusal], most: int = 3) -> str:
    """The feedback of a refused notebook: the first refusals, and how many more."""
    more = f" ({len(found) - most} more.)" if len(found) > most else ""
    return "Not run: this notebook may not be graded as it stands. " + " ".join(str(r) for r in found[:most]) + more


TOO_DEEP = "the code is nested too deeply to be checked; write it in simpler statements."
_TOO_DEEP = object()


def _parse(source: str):
    """The tree; None for code that compiles nowhere (a syntax error); _TOO_DEEP for code too deep to parse here."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        return _TOO_DEEP


# --- resolution: names and attribute chains to the real objects ------------------------------------

@dataclass(frozen=True)
class _Static:
    obj: object
    text: str           # how the source names it (for messages)

    @property
    def module(self) -> bool:
        return isinstance(self.obj, types.ModuleType)


VALUE = "value"
MOST = 20  # refusals reported per program


class _Enough(Exception):
    """Raised once MOST refusals are found: the verdict is already 'refused'."""


def _module(name: str):
    """An admitted module (imported here, by our own name), or None."""
    return importlib.import_module(name) if name in MODULES else None


def _member(module_name: str, attr: str):
    """``module.attr`` if the module admits that name: (True, object), else (False, None)."""
    sub = f"{module_name}.{attr}"
    if sub in MODULES:
        return True, importlib.import_module(sub)
    names = MODULES[module_name]
    if attr.startswith("_") or (names is not None and attr not in names):
        return False, None
    obj = getattr(importlib.import_module(module_name), attr, _MISSING)
    if obj is _MISSING or isinstance(obj, types.ModuleType):
        return False, None
    return True, obj


_MISSING = object()


@functools.cache
def _admitted_in(module_name: str) -> dict[int, object]:
    """id -> object of the module and of every object it admits."""
    module = importlib.import_module(module_name)
    names = MODULES[module_name]
    out = {id(module): module}
    for attr in (names if names is not None else [n for n in dir(module) if not n.startswith("_")]):
        ok, obj = _member(module_name, attr)
        if ok:
            out[id(obj)] = obj
    return out


def _admitted_objects() -> list:
    return [obj for name in MODULES for obj in _admitted_in(name).values()]


def _is_admitted(obj) -> bool:
    """Is ``obj`` an admitted module or object? (Only modules already imported are searched: an object
    of a module that was never imported cannot be in hand.)"""
    return any(id(obj) in _admitted_in(name) for name in MODULES if name in sys.modules)


@functools.cache
def _surface(torch_too: bool) -> frozenset:
    """Every attribute name of the types a value can have at run time, which a student's own
    attribute may therefore not be named (unless it is on VALUE_ATTRIBUTES). Torch's types count
    when the program can hold a tensor (it imports torch); a program that does not is spared
    importing torch here."""
    import numpy as np
    kinds = [object, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
             types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType, types.FrameType, types.CodeType,
             types.TracebackType, types.SimpleNamespace, property, staticmethod, classmethod, super,
             functools.partial, str, bytes, list, dict, set, frozenset, tuple, int, float, complex, slice, range,
             memoryview, enumerate, zip, map, filter, reversed, type({}.keys()), type({}.items()),
             np.ndarray, np.generic, np.float64, np.int64, np.ufunc, np.dtype, np.flatiter, np.nditer, np.broadcast,
             np.finfo, np.random.Generator, np.vectorize]
    kinds += [v for v in vars(builtins).values() if isinstance(v, type) and issubclass(v, BaseException)]
    if torch_too:
        import torch
        kinds += [torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.dtype, torch.device, torch.Size,
                  torch.finfo, torch.iinfo, torch.Generator, torch.autograd.graph.Node, torch.UntypedStorage,
                  torch.TypedStorage, torch.no_grad]
    return frozenset(n for k in kinds for n in dir(k))


# --- the program: bindings, then every node ---------------------------------------------------------

class _Program:
    def __init__(self, trees: list, namespace: dict | None):
        self.trees, self.namespace = trees, namespace
        self.found: dict[tuple[str, int], str] = {}
        self.names: dict[str, object] = {}  # name -> _Static | VALUE | ("conflict", text)
        self.torch = False  # can the program hold a tensor? (decided once its names are bound)

    def check(self) -> list[Refusal]:
        """Every refusal (at most MOST: the work stays bounded whatever the notebook holds)."""
        self.label = self.source = ""
        try:
            self._bind()
            self.torch = "torch" in sys.modules if self.namespace is not None else any(
                isinstance(k, _Static) and _package(k.obj) == "torch" for k in self.names.values())
            for label, source, tree in self.trees:
                self.label, self.source = label, source
                for statement in tree.body:
                    self._stmt(statement, in_class=False)
        except _Enough:
            pass
        except RecursionError:
            self.found[(self.label or self.trees[0][0], 1)] = TOO_DEEP
        return [Refusal(cell, line, text) for (cell, line), text in self.found.items()]

    def refuse(self, node, text: str) -> None:
        self.found.setdefault((self.label, getattr(node, "lineno", 0)), text)
        if len(self.found) >= MOST:
            raise _Enough

    def text(self, node) -> str:
        segment = ast.get_source_segment(self.source, node) if self.source else None
        return (segment or ast.unparse(node))[:80]

    # -- bindings over the whole program --

    def _bind(self) -> None:
        """Each name of the program: static (imports and top-level aliases of one object), a value
        (any other binding), or a conflict (both; refused where it is bound)."""
        static: dict[str, list] = {}
        other: set[str] = set()
        aliases = []
        for label, source, tree in self.trees:
            alias_targets = {id(n.targets[0]) for n in tree.body if _alias(n)}
            aliases += [n for n in tree.body if _alias(n)]
            for node in ast.walk(tree):
                for name, obj in self._import_bindings(node):
                    static.setdefault(name, []).append(obj)
                if id(node) not in alias_targets:
                    other |= _value_bindings(node)
        self._classify(static, other)
        for node in aliases:  # in program order: `xp = np`, `softmax = torch.softmax`
            kind = self._quiet(node.value, module_ok=True)
            name = node.targets[0].id
            if isinstance(kind, _Static):
                static.setdefault(name, []).append(kind.obj)
            else:
                other.add(name)
            self._classify(static, other)

    def _classify(self, static: dict, other: set) -> None:
        for name in set(static) | other:
            objs = static.get(name, [])
            if objs and (name in other or any(o is not objs[0] for o in objs)):
                self.names[name] = ("conflict", name)
            else:
                self.names[name] = _Static(objs[0], name) if objs else VALUE

    def _quiet(self, node, module_ok: bool):
        """The kind of an expression without recording refusals (used while binding)."""
        saved = self.found, getattr(self, "label", ""), getattr(self, "source", "")
        self.found, self.label, self.source = {}, "", ""
        try:
            return self._expr(node, module_ok)
        finally:
            self.found, self.label, self.source = saved

    def _import_bindings(self, node) -> list:
        out = []
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if a.name in MODULES and (a.asname or top in MODULES):
                    out.append((a.asname or top, importlib.import_module(a.asname and a.name or top)))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
            for a in node.names:
                ok, obj = _member(node.module, a.name)
                if ok:
                    out.append((a.asname or a.name, obj))
        return out

    # -- statements --

    def _stmt(self, node, in_class: bool) -> None:
        if not isinstance(node, SYNTAX):
            return self.refuse(node, f"`{type(node).__name__}` ({self.text(node)}) is not admitted in the exercises; "
                                     "write plain functions, loops and NumPy/torch calls.")
        if isinstance(node, ast.Import | ast.ImportFrom):
            return self._import(node)
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            return self._definition(node, in_class)
        if isinstance(node, ast.Global | ast.Nonlocal | ast.Pass | ast.Break | ast.Continue):
            return None
        if _alias(node) and isinstance(self.names.get(node.targets[0].id), _Static):
            self._expr(node.value, module_ok=True)  # a static alias (`xp = np`): it names what it resolves to
            return None
        self._children(node, in_class)

    def _part(self, node, in_class: bool) -> None:
        """The pieces of a statement that are neither statements nor expressions."""
        if not isinstance(node, SYNTAX):
            return self.refuse(node, f"`{type(node).__name__}` is not admitted in the exercises.")
        if isinstance(node, ast.MatchClass):
            return self._match_class(node)
        if isinstance(node, ast.pattern | ast.excepthandler | ast.comprehension | ast.arg):
            for name in _value_bindings(node):
                self._binding(node, name)
        if isinstance(node, ast.comprehension) and node.is_async:
            self.refuse(node, "asynchronous code is not admitted in the exercises.")
        self._children(node, in_class)

    def _children(self, node, in_class: bool) -> None:
        for _, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.stmt):
                    self._stmt(child, in_class)
                elif isinstance(child, ast.expr):
                    self._expr(child)
                elif isinstance(child, ast.AST):
                    self._part(child, in_class)

    def _binding(self, node, name: str) -> None:
        kind = self.names.get(name)
        if isinstance(kind, tuple):
            self.refuse(node, f"`{name}` names a module or a library object here and something else elsewhere; "
                              "give each its own name.")
        elif name in vars(builtins) and name not in BUILTINS | SHADOWED:
            self.refuse(node, f"`{name}` is the name of a builtin the exercises do not admit; name your variable "
                              "something else.")
        elif name.startswith("__") and name.endswith("__") and name != "__name__":
            self.refuse(node, f"`{name}` is one of Python's own names; name your variable something else.")

    def _definition(self, node, in_class: bool) -> None:
        dunder = node.name.startswith("__") and node.name.endswith("__")
        if dunder and not (in_class and isinstance(node, ast.FunctionDef) and node.name in DUNDER_DEFS):
            self.refuse(node, f"defining `{node.name}` is not admitted (it changes how Python itself treats your "
                              "objects); write an ordinary method.")
        elif not dunder and not in_class:
            self._binding(node, node.name)
        if getattr(node, "type_params", None):
            self.refuse(node, "type parameters (`def f[T]`) are not admitted in the exercises.")
        for d in node.decorator_list:
            self._expr(d)
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                self._expr(base)
            if node.keywords:
                self.refuse(node, f"class keywords ({self.text(node.keywords[0])}) are not admitted; write "
                                  f"`class {node.name}(Base):`.")
        else:
            self._part(node.args, in_class=False)
            if node.returns:
                self._expr(node.returns)
        for statement in node.body:
            self._stmt(statement, in_class=isinstance(node, ast.ClassDef))

    def _import(self, node) -> None:
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if module == "__future__" and all(a.name in FUTURE for a in node.names):
                return None
            names = [f"{module}.{a.name}" for a in node.names]
        else:
            module, names = None, [a.name for a in node.names]
        for full in ([module] if module is not None else names):
            if full.split(".")[0] in COURSE:
                return self.refuse(node, f"importing {full} is not admitted: the course's own code holds the "
                                         f"ready-made answers, a ready-made answer earns no credit; {YOURSELF}.")
            if full not in MODULES:
                return self.refuse(node, f"`{self.text(node)}` is not admitted: the exercises may import only "
                                         f"{', '.join(sorted(MODULES))}.")
        if isinstance(node, ast.Import):
            for a in node.names:
                self._binding_static(node, a.asname or a.name.split(".")[0])
            return None
        for a in node.names:
            if a.name == "*":
                return self.refuse(node, f"`from {module} import *` is not admitted: import the names you use "
                                         f"(from {module} import name).")
            if not _member(module, a.name)[0]:
                return self.refuse(node, self._not_listed(f"{module}.{a.name}", module))
            self._binding_static(node, a.asname or a.name)

    def _binding_static(self, node, name: str) -> None:
        if name in vars(builtins) and name not in BUILTINS | SHADOWED:
            self._binding(node, name)  # (a name imported as two things is refused where it is used)

    # -- expressions: each is static (a resolved object) or a value --

    def _expr(self, node, module_ok: bool = False):
        kind = self._kind(node)
        if isinstance(kind, _Static) and kind.module and not module_ok:
            self.refuse(node, f"the module `{self.text(node)}` may only be used as `{self.text(node)}.name`: it "
                              "may not be stored, passed, called or returned.")
            return VALUE
        return kind

    def _kind(self, node):
        if not isinstance(node, SYNTAX):
            self.refuse(node, f"`{type(node).__name__}` ({self.text(node)}) is not admitted in the exercises.")
            return VALUE
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        self._children(node, in_class=False)  # an expression holds no statement
        return VALUE

    def _name(self, node):
        name = node.id
        if not isinstance(node.ctx, ast.Load):
            self._binding(node, name)
            return VALUE
        kind = self.names.get(name)
        if isinstance(kind, _Static) or kind == VALUE:
            return kind
        if isinstance(kind, tuple):
            self.refuse(node, f"`{name}` names different things in different places (imports, or an import and a "
                              "variable); give each its own name.")
            return VALUE
        if name in DUNDER_READ:
            return VALUE
        if name.startswith("__") and name.endswith("__"):
            self.refuse(node, f"`{name}` reaches Python's internals, which the exercises do not need; use the "
                              "arguments you are given and NumPy/torch functions.")
            return VALUE
        if self.namespace is not None and name in self.namespace:
            return self._from_namespace(node, self.namespace[name])
        if name in vars(builtins):
            if name not in BUILTINS:
                self.refuse(node, f"the builtin `{name}` is not admitted in the exercises (it can reach code by a "
                                  f"name built at run time, or the machine); {ADVICE.get(name, YOURSELF)}.")
                return VALUE
            return _Static(getattr(builtins, name), name)
        return VALUE  # never bound: a NameError when it runs

    def _from_namespace(self, node, obj):
        """A name the visible tests find in the notebook (bound in another cell)."""
        if _is_admitted(obj):
            return _Static(obj, node.id)
        library = isinstance(obj, types.ModuleType | types.BuiltinFunctionType | type) or (
            isinstance(obj, types.FunctionType) and obj.__module__ not in (None, "__main__"))
        if library and str(getattr(obj, "__module__", "")) != "__main__":
            self.refuse(node, self._not_listed(node.id, None))
        return VALUE

    def _attribute(self, node):
        attr = node.attr
        base = self._expr(node.value, module_ok=True)
        loads = isinstance(node.ctx, ast.Load)
        if attr.startswith("_") and not (attr == "__init__" or (attr in DUNDER_READ and loads)):
            self.refuse(node, f"`{self.text(node)}` uses a private name (starting with _), which reaches the "
                              f"machinery of Python or torch (their kernels included); use public NumPy/torch "
                              f"functions, and name your own attributes without a leading underscore; {YOURSELF}.")
            return VALUE
        own = attr in STORED or not (attr in _surface(self.torch) or attr.startswith("_"))
        if not loads and (isinstance(base, _Static) or not own):
            self.refuse(node, f"`{self.text(node)}`: the libraries' objects may not be changed (`.{attr}` is "
                              "one of theirs); use your own variables and attributes.")
            return VALUE
        if isinstance(base, _Static) and base.module:
            ok, obj = _member(base.obj.__name__, attr)
            if not ok:
                self.refuse(node, self._not_listed(self.text(node), base.obj.__name__))
                return VALUE
            return _Static(obj, self.text(node))
        if attr in DUNDER_READ or attr == "__init__" or self._value_attribute(attr):
            return VALUE
        if attr == "forward":
            self.refuse(node, f"`{self.text(node)}` calls a module's forward, one of torch's entry points (with the "
                              f"module handed to you, a ready-made answer); call your own layers as `layer(x)`, and "
                              f"{YOURSELF}.")
            return VALUE
        self.refuse(node, f"`{self.text(node)}`: `.{attr}` is not admitted on a value (it reaches the machinery "
                          f"of Python, NumPy or torch, not the maths); use the maths of tensors and arrays, and "
                          f"give your own attributes another name.")
        return VALUE

    def _call(self, node):
        func = self._expr(node.func)
        if isinstance(func, _Static) and func.obj is super and len(node.args) not in (0, 2):
            self.refuse(node, "write super() or super(Class, self).")
        for a in node.args:
            self._expr(a)
        for k in node.keywords:
            self._expr(k.value)
        return VALUE

    def _match_class(self, node) -> None:
        self._expr(node.cls)
        if node.patterns:
            self.refuse(node, f"positional class patterns ({self.text(node.cls)}(...)) are not admitted; match "
                              "on values, or write `case Class(attribute=name)`.")
        for attr in node.kwd_attrs:
            if not self._value_attribute(attr) or attr.startswith("_"):
                self.refuse(node, f"`case ...({attr}=...)` reads `.{attr}`, which is not admitted on a value.")
        for p in node.kwd_patterns:
            self._part(p, in_class=False)

    def _value_attribute(self, attr: str) -> bool:
        return attr in VALUE_ATTRIBUTES or (not attr.startswith("_") and attr not in _surface(self.torch))

    def _not_listed(self, text: str, module: str | None) -> str:
        where = f" ({module} admits: {_sample(module)})" if module else ""
        return (f"`{text}` is not on the list of what the exercises admit{where}: a ready-made answer, or a way to "
                f"one, earns no credit; {YOURSELF}.")


def _sample(module: str) -> str:
    names = MODULES.get(module)
    return "every public name" if names is None else ", ".join(sorted(names)[:12]) + ", ..."


def _value_bindings(node) -> set[str]:
    """Names that ``node`` itself binds to run-time values (not imports)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
        return {node.id}
    if isinstance(node, ast.arg):
        return {node.arg}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
        return {node.name}
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    if isinstance(node, ast.Global | ast.Nonlocal):
        return set(node.names)
    return set()


def _package(obj) -> str:
    name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    return str(name or "").split(".")[0]


def _alias(node) -> bool:
    return isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)


__all__ = ["Refusal", "refusals", "refusals_in_cell", "explain", "MODULES", "BUILTINS", "VALUE_ATTRIBUTES"]
