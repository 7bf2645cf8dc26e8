"""The notebook shapes the closure walk starts from (:mod:`.walk`): everything a notebook can define, as
notebooks define it, so that the walk can follow every reference the libraries' machinery keeps to it.

A shape is a notebook cell's source. :func:`shapes` returns them: hand-written cells of the forms students
use (functions, annotations naming their own classes, decorated functions, generators, closures, lambdas,
exceptions raised and caught, named tuples, per-head records yielded by a generator, a layer with a
nested helper class, a tensor subclass) and one generated class per combination of a base
(:data:`BASES`) and a class decorator (:data:`DECORATORS`), each with a field per annotation form
(:data:`ANNOTATIONS`: a notebook class, the isinstance-only ``np.ndarray``, typing constructs) given a
default of each form (:data:`DEFAULTS`: none, a literal, ``field(...)``, a notebook object, a name bound
at the top level to any of these), and the members of every admitted form: methods named like the
values' attributes and not, ``property``, ``cached_property``, ``staticmethod``, ``classmethod``,
``lru_cache``, ``torch.no_grad()``, a nested class, class-level constants and objects. The walk
executes each shape in a throwaway namespace, as the sandbox runs cells, and takes the objects it
defines as the rule sees them (:func:`.walk.notebook_roots`).

A shape may hold code the rule refuses (a combination that turns out to be a route): the walk runs and
starts from only the statements the rule admits, as the grader does.
"""
import ast
import builtins
import copy
import dataclasses
import itertools
import textwrap

PRELUDE = """\
import collections
import copy
import functools
import math
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Own:
    def __init__(self, x=None):
        self.x = x

    def reshape(self, *args):
        return self.x

    def helper(self):
        return self
"""

FORMS = '''\
def annotated(x: Own, y: "Own" = None, z: typing.Optional[Own] = None, w: np.ndarray = None) -> Own:
    return x


def trusting(o):
    return o.x


used = trusting(Own(1))


@functools.lru_cache(maxsize=None)
def cached(n):
    return n


@torch.no_grad()
def no_grad_function(x):
    return x


def outer(k):
    def inner(x):
        return x * k
    return inner


closure = outer(2)
lam = lambda x: x  # noqa: E731


def generator(n):
    for i in range(n):
        yield Own(i)


yielded = generator(3)
heads = [Own(i) for i in range(2)]
mapping = {"own": Own(), "values": [Own()]}


class OwnError(ValueError):
    pass


try:
    raise OwnError(Own(), "words")
except OwnError as err:
    caught = err

Pair = collections.namedtuple("Pair", "first second")
pair = Pair(Own(), 1)


def wrapper_of(fn):
    @functools.wraps(fn)
    def wrapped(*args):
        return fn(*args)
    return wrapped


wrapped = wrapper_of(annotated)
partial = functools.partial(annotated, Own())
deep = copy.deepcopy(Own(Own()))


@dataclass(frozen=True)
class HeadParams:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


def head_params(w, h):
    for q, k, v in zip(*(part.chunk(h) for part in w.chunk(3))):
        yield HeadParams(q, k, v)


per_head = [head.q.sum() for head in head_params(torch.ones(12, 4), 2)]


class Layer(nn.Module):
    class Helper:
        def __init__(self, scale):
            self.scale = scale

        def view(self, x):
            return x * self.scale

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2, 3))
        self.lin = nn.Linear(3, 2)
        self.softmax = nn.Softmax(-1)
        self.dim = 3
        self.helper = Layer.Helper(2.0)
        self.register_buffer("mask", torch.ones(2, 2).tril())

    def forward(self, x):
        return self.helper.view(self.lin(x))


layer = Layer()


class OwnTensor(torch.Tensor):
    pass


own_tensor = OwnTensor([[1.0, 2.0, 3.0]]) * 3


class Config(NamedTuple):
    n_head: int = 2
    own: Own = Own()


config = Config()


class Holder:
    class T:
        def reshape(self):
            return self

    def __init__(self):
        self.inner = Holder.T()


holders = [Holder()]


@dataclass
class Rebuilt:
    part: Own = None

    def __init__(self, part):
        self.part = part
        self.inside = part


rebuilt = Rebuilt(Own(1))


class Raised(ValueError):
    def __init__(self, part):
        super().__init__(part)
        self.inside = part


raised_own = Raised(Own(3))


class Heads(nn.ModuleList):
    def __init__(self, layer):
        super().__init__([layer])
        self.first = layer


heads_list = Heads(Layer())
'''

BASES = ["", "nn.Module", "torch.Tensor", "ValueError", "list", "dict", "NamedTuple", "Own"]
DECORATORS = ["", "@dataclass", "@dataclass(frozen=True)", "@functools.total_ordering"]
ANNOTATIONS = ["Own", "np.ndarray", "typing.Optional[Own]", "list[Own]", "torch.Tensor", "typing.Any", '"Own"']
DEFAULTS = ["None", "field(default=None)", "field(default_factory=list)", "field(default_factory=lambda: Own())",
            "Own()"]


INIT = {  # base -> how a class that is not a dataclass takes its one required argument, and its instance
    "": ("self.req = req", "Own()"), "Own": ("super().__init__(req)\n        self.req = req", "Own()"),
    "nn.Module": ("super().__init__()\n        self.req = req", "Own()"), "torch.Tensor": (None, "[1.0, 2.0]"),
    "ValueError": ("super().__init__(req)\n        self.req = req", "Own()"),
    "list": ("super().__init__([req])\n        self.req = req", "Own()"),
    "dict": ("super().__init__(own=req)\n        self.req = req", "Own()"), "NamedTuple": (None, "Own()"),
}


def _generated_class(n: int, base: str, decorator: str) -> str:
    """Class ``C{n}``: a required field, a field per annotation form with a default of each form, and a
    member of every admitted form; then its instance ``c{n}``."""
    defaults = [d for d in DEFAULTS if "dataclass" in decorator or "field(" not in d]  # (a Field: in dataclasses)
    lines = [f"    f{i}: {annotation} = {defaults[(n + i) % len(defaults)]}" for i, annotation in enumerate(ANNOTATIONS)]
    init, argument = INIT[base]
    if init and "dataclass" not in decorator:
        lines.append(f"\n    def __init__(self, req):\n        {init}")
    body = "\n".join(["    req: Own", *lines, "    LIMIT = 3", "    SHARED = Own()"]) + textwrap.indent(textwrap.dedent('''

        class Inner:
            def reshape(self):
                return self

        def view(self, *args):
            return self.req

        def helper(self):
            return self

        def __eq__(self, other):
            return self is other

        def __lt__(self, other):
            return False

        @property
        def size(self):
            return self.req

        @cached_property
        def parts(self):
            return [self.req]

        @staticmethod
        def static(x):
            return x

        @classmethod
        def make(cls):
            return cls(Own())

        @functools.lru_cache(maxsize=None)
        def memo(self):
            return self.req

        @torch.no_grad()
        def detached(self, x):
            return x
    '''), "    ")
    head = "\n".join(([decorator] if decorator else []) + [f"class C{n}({base}):" if base else f"class C{n}:"])
    argument = "Own()" if "dataclass" in decorator else argument
    return f"{head}\n{body}\n\nc{n} = C{n}({argument})\n"


def _held_defaults() -> str:
    """Each default form bound to a name at the top level (a name per field), then given as the default of a
    field of each annotation form, in a dataclass and in a plain class."""
    out = []
    for d, default in enumerate(DEFAULTS):
        for kind in ("Held", "Plain"):
            held = "\n".join(f"{kind.upper()}_{d}_{i} = {default}" for i in range(len(ANNOTATIONS)))
            fields = "\n".join(f"    f{i}: {a} = {kind.upper()}_{d}_{i}" for i, a in enumerate(ANNOTATIONS))
            decorator = "@dataclass\n" if kind == "Held" else ""
            out.append(f"{held}\n\n\n{decorator}class {kind}{d}:\n{fields}\n\n\n{kind.lower()}{d} = {kind}{d}()\n")
    return "\n\n".join(out)


def shapes() -> list[tuple[str, str]]:
    """[(name, source)]: the hand-written forms, then one generated class per base and decorator (one cell)."""
    classes = [_generated_class(n, base, decorator)
               for n, (base, decorator) in enumerate(itertools.product(BASES, DECORATORS))]
    return [("forms", PRELUDE + "\n\n" + FORMS), ("classes", PRELUDE + "\n\n" + "\n\n".join(classes)),
            ("held defaults", PRELUDE + "\n\n" + _held_defaults())]


# --- a shape run as the grader runs a notebook, and seen as the rule sees it --------------------------------

PROBE = 1 << 30  # the statement index the rule's refusals of a probing expression are recorded under


class Notebook:
    """Every shape, run: the classes their code made (recorded as Python builds them, local classes
    included), the functions and bindings whose objects the rule trusts to be the student's own (checked
    where the code runs: :meth:`guard`), and what went against that trust."""

    def __init__(self):
        self.classes: dict[tuple, list] = {}   # (shape, line, name) of a class statement -> the classes it made
        self.every_class: list[type] = []
        self.ids: set[int] = set()
        self.broken: list[tuple[str, str]] = []  # (where, what): the rule's trust, broken at run time
        self.where = "running the shapes"        # what the walk is doing now (the path of the call it makes)
        self.shapes: list[Shape] = []

    def build_class(self, shape: str):
        original = builtins.__build_class__

        def record(body, name, *bases, **keywords):
            cls = original(body, name, *bases, **keywords)
            self.classes.setdefault((shape, body.__code__.co_firstlineno, name), []).append(cls)
            self.every_class.append(cls)
            self.ids.add(id(cls))
            return cls
        return record

    def is_class(self, obj) -> bool:
        return id(obj) in self.ids and isinstance(obj, type)

    def is_own(self, obj) -> bool:
        return isinstance(obj, tuple(self.every_class)) and not isinstance(obj, type)

    def guard(self, expect: str, shape: str, key: tuple, value) -> None:
        """Called where the shapes' code binds what the rule trusts (a parameter, ``self``, ``cls``, a loop's
        target, an assignment): the object must be what the rule takes it for."""
        classes = tuple(self.classes.get((shape, *key), ())) if key else tuple(self.every_class)
        ok = isinstance(value, type) and issubclass(value, classes) if expect == "class" else isinstance(
            value, classes) and not isinstance(value, type)
        if not ok:
            self.broken.append((self.where, f"the rule trusts {expect} {key[1] if key else ''} of {shape} to be "
                                            f"the student's own, but it was {type(value).__name__}".replace("  ", " ")))


@dataclasses.dataclass
class Shape:
    name: str
    source: str
    program: object          # scopes.Program
    rule: object             # rule.Rule
    refused: set             # the statements the rule refuses (not run)
    namespace: dict
    trusted: dict            # (line, name) of a def -> [(parameter position, expectation, class key)]
    failed: list             # the admitted statements that raised when run: (line, error)

    def view(self, expr: ast.expr):
        """(admitted, kind): whether the rule admits ``expr`` written at the notebook's top level (a class
        may stand where a class may: called, subclassed, Class.name), and what it takes it for."""
        rule = self.rule
        saved = rule.stmt, getattr(rule, "cell", 0)
        rule.stmt, rule.cell = PROBE, 0
        try:
            kind = rule._expr(expr, rule.p.module, class_ok=True)
        finally:
            found = rule.found.pop(PROBE, [])
            rule.stmt, rule.cell = saved
        return not found, kind

    def trusts_arguments(self, fn) -> bool:
        """Does the rule trust what every call of ``fn`` passes (a parameter taken for the student's own)?"""
        return any(expect == "own" for _, expect, _ in self.trusted.get(self.function_key(fn), ()))

    def function_key(self, fn) -> tuple | None:
        code = getattr(fn, "__code__", None)
        if code is None or code.co_filename != f"<shape {self.name}>":
            return None
        return code.co_firstlineno, code.co_name


def _first_line(node) -> int:
    return min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])


def _class_key(scope) -> tuple | None:
    return (_first_line(scope.node), scope.node.name) if scope is not None and scope.kind == "class" else None


def _at(node) -> tuple:
    return node.lineno, node.col_offset


def _trust(program, rule) -> dict[tuple, tuple]:
    """{(line, column) of the node that binds: (expectation, class key)} of every binding the rule takes for the student's
    own object or class: ``self`` ("self": an instance of its class), ``cls`` ("class"), a parameter, a loop's
    target or an assignment ("own", or "class" for an alias of a class)."""
    out = {}
    for scope in program.scopes:
        for bindings in scope.bindings.values():
            for b in bindings:
                if b.how in ("def", "class", "import"):
                    continue
                kind = rule.binding_kind(b)
                if kind.tag not in ("own", "class"):
                    continue
                owner = b.written.parent if b.how == "first" else None
                if b.how == "first" and kind.tag == "own":
                    out[_at(b.node)] = ("self", _class_key(owner))
                elif b.how == "first":
                    out[_at(b.node)] = ("class", _class_key(owner))
                else:
                    out[_at(b.node)] = (kind.tag, None)
    return out


class _Guards(ast.NodeTransformer):
    """The shape's code with a call of the notebook's guard wherever a trusted binding is made."""

    def __init__(self, shape: str, trust: dict):
        self.shape, self.trust = shape, trust

    def _check(self, node, name: str, at) -> ast.stmt:
        expect, key = self.trust[_at(node)]
        call = ast.Call(ast.Name("__walk_guard__", ast.Load()), [ast.Constant(expect), ast.Constant(self.shape),
                        ast.Constant(key), ast.Name(name, ast.Load())], [])
        return ast.copy_location(ast.Expr(call), at)

    def _targets(self, target) -> list:
        return [n for n in ast.walk(target) if isinstance(n, ast.Name) and _at(n) in self.trust]

    def _body(self, statements: list) -> list:
        out = []
        for st in statements:
            st = self.visit(st)
            out.append(st)
            if isinstance(st, ast.Assign | ast.AnnAssign):
                for t in st.targets if isinstance(st, ast.Assign) else [st.target]:
                    out += [self._check(n, n.id, st) for n in self._targets(t)]
        return out

    def generic_visit(self, node):
        for name, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(node, name, self._body(value))
            elif isinstance(value, list):
                setattr(node, name, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, name, self.visit(value))
        return node

    def visit_FunctionDef(self, node):
        node = self.generic_visit(node)
        args = node.args
        every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        checks = [self._check(a, a.arg, node.body[0]) for a in every if _at(a) in self.trust]
        node.body = checks + node.body
        return node

    def visit_For(self, node):
        node = self.generic_visit(node)
        node.body = [self._check(n, n.id, node.body[0]) for n in self._targets(node.target)] + node.body
        return node


def run_shapes(notebook: Notebook) -> list[Shape]:
    """Judge each shape with the rule, then run the statements it admits (with the guards) in a namespace of
    their own, as the sandbox runs cells."""
    from .rule import Rule
    from .scopes import Program
    for name, source in shapes():
        tree = ast.parse(source)
        program = Program([tree])
        rule = Rule(program, [{"label": name, "source": source}], set())
        refused = set(rule.judge(range(len(program.statements))))
        trust = _trust(program, rule)
        trusted = {}
        for scope in program.scopes:
            if scope.kind == "function" and isinstance(scope.node, ast.FunctionDef):
                a = scope.node.args
                every = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
                trusted_here = [(i, *trust[_at(x)]) for i, x in enumerate(every) if _at(x) in trust]
                if trusted_here:
                    trusted[(_first_line(scope.node), scope.node.name)] = trusted_here
        guarded = _Guards(name, trust)
        space = {"__name__": "__main__", "__builtins__": dict(vars(builtins), __build_class__=notebook.build_class(name),
                                                             __walk_guard__=notebook.guard)}
        failed = []
        for i, (_, statement) in enumerate(program.statements):
            if i in refused:
                continue
            module = ast.fix_missing_locations(ast.Module([guarded.visit(copy.deepcopy(statement))], []))
            notebook.where = f"running {name}, line {statement.lineno}"
            try:
                exec(compile(module, f"<shape {name}>", "exec"), space)  # noqa: S102 - our own shapes
            except Exception as err:  # noqa: BLE001 - a form that does not run here defines nothing
                failed.append((statement.lineno, f"{type(err).__name__}: {err}"[:200]))
        notebook.shapes.append(Shape(name, source, program, rule, refused, space, trusted, failed))
    notebook.where = "walking"
    return notebook.shapes
