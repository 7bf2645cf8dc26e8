"""Python's own scoping, read from the syntax tree in one pass (the rules of the language reference,
"Execution model: naming and binding"): where each name is bound, where each name that is read
resolves, and, for each top-level statement of a notebook, the module-level names it binds and reads.

* A name bound anywhere in a function (assignment, ``for``, ``with ... as``, ``except ... as``, an
  import, a ``def`` or ``class``, a parameter, a ``match`` capture, ``del``) is local to the whole
  function, unless the function declares it ``global`` or ``nonlocal``.
* A free name resolves in the nearest enclosing function that binds it, else at module level (then
  builtins). Class bodies are skipped: their names are not visible in their methods.
* A class body reads its own names first, then the module's (so a name it binds may still be the
  module's, or a builtin, before that binding runs).
* Comprehensions have a scope of their own; their first iterable is evaluated outside it; an
  assignment expression (``:=``) in one binds in the enclosing function.
* Decorators, default values, annotations and base classes are evaluated in the enclosing scope.

The work is linear in the size of the trees: every node is visited once, every read resolved once.
"""
import ast
from dataclasses import dataclass, field

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(eq=False)
class Binding:
    """One place a name is bound."""
    name: str
    node: ast.AST   # the node that binds it (for its line)
    how: str        # import | def | class | alias | first (a method's first parameter) | param | item (a loop's
    #                 target) | other | del
    stmt: int       # the top-level statement it belongs to
    scope: "Scope"  # where it binds (after global/nonlocal)
    value: object = None  # alias: the expression; import: (module, attribute or None); def/class: the node;
    #                       first/param: (the def node, position); item: (the iterable, where it is read,
    #                       the target's position in each item: (1,) for i, x in enumerate(...))
    written: "Scope | None" = None  # where it is written (``global x`` in a function binds x at module level)


@dataclass(eq=False)
class Scope:
    kind: str                   # module | function | class | comprehension
    node: ast.AST | None
    parent: "Scope | None"
    bindings: dict = field(default_factory=dict)   # name -> [Binding]
    globals_: set = field(default_factory=set)
    nonlocals: set = field(default_factory=set)
    local: set = field(default_factory=set)        # names local to it (bound, not global/nonlocal)
    raw: list = field(default_factory=list)        # bindings as written, before global/nonlocal


@dataclass(eq=False)
class Read:
    node: ast.Name
    scope: Scope
    stmt: int


class Program:
    """The scopes of a program made of cells (module-level code run in order, one namespace).

    ``statements``: (cell index, top-level statement); ``where[id(name node)]``: the scope a read
    resolves in; ``reads[i]`` / ``binds[i]``: the module-level names statement i reads (anywhere in
    it, functions included) and binds or changes (an assignment, ``global`` in a function it defines,
    an item or attribute set at module level, a method called on a module-level name, a call of one of
    the notebook's functions that sets module-level names)."""

    def __init__(self, trees: list[ast.Module]):
        self.module = Scope("module", None, None)
        self.statements: list[tuple[int, ast.stmt]] = []
        self.scopes: list[Scope] = [self.module]
        self.reads_list: list[Read] = []
        self.mutations: list[tuple[int, ast.Name, Scope, bool]] = []  # (..., by a method call)
        self.calls: list[tuple[int, ast.Name, Scope]] = []
        self.scope_of: dict[int, Scope] = {}   # id(def/class/lambda/comprehension node) -> its own scope
        self.called: set[int] = set()          # id of every expression that is called (a Call's func)
        self.call_list: list[tuple[ast.Call, Scope, int]] = []
        self.attribute_stores: list[tuple[ast.Attribute, object, Scope]] = []  # (target, value or None, scope)
        self.attribute_loads: dict[str, list[ast.Attribute]] = {}  # attribute name -> the loads of it
        self.wildcards: set[int] = set()   # statements that may bind any name (import *, __builtins__ = ...)
        self.star_modules: dict[int, str] = {}  # the module of each `from M import *` among them
        self.stmt = -1
        for cell, tree in enumerate(trees):
            for statement in tree.body:
                self.stmt = len(self.statements)
                self.statements.append((cell, statement))
                self._walk(statement, self.module, now=True)
        self._finish()

    # -- pass 1: scopes, bindings, reads --

    def _scope(self, kind: str, node, parent: Scope) -> Scope:
        scope = Scope(kind, node, parent)
        self.scopes.append(scope)
        self.scope_of[id(node)] = scope
        return scope

    def _bind(self, scope: Scope, name: str, node, how: str, value=None) -> None:
        scope.raw.append(Binding(name, node, how, self.stmt, scope, value, scope))

    def _walk(self, node, scope: Scope, now: bool = False) -> None:
        """``now``: the code runs when its statement runs (module level, class bodies there), not later."""
        kind = type(node)
        if kind is ast.Name:
            if isinstance(node.ctx, ast.Load):
                self.reads_list.append(Read(node, scope, self.stmt))
            else:
                self._bind(scope, node.id, node, "del" if isinstance(node.ctx, ast.Del) else "other")
        elif kind is ast.Call:
            self.called.add(id(node.func))
            self.call_list.append((node, scope, self.stmt))
            self._children(node, scope, now)
        elif kind is ast.Attribute:
            if isinstance(node.ctx, ast.Load):
                self.attribute_loads.setdefault(node.attr, []).append(node)
            else:
                self.attribute_stores.append((node, None, scope))
            self._walk(node.value, scope, now)
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
            self._function(node, scope)
        elif kind is ast.ClassDef:
            for child in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                self._walk(child, scope, now)
            self._bind(scope, node.name, node, "class", node)
            inner = self._scope("class", node, scope)
            for statement in node.body:
                self._walk(statement, inner, now)
        elif kind in COMPREHENSIONS:
            self._comprehension(node, scope, now)
        elif kind is ast.NamedExpr:
            self._walk(node.value, scope, now)
            target = scope
            while target.kind == "comprehension":
                target = target.parent
            self._bind(target, node.target.id, node.target, "other")
        elif kind is ast.Global:
            scope.globals_.update(node.names)
        elif kind is ast.Nonlocal:
            scope.nonlocals.update(node.names)
        elif kind is ast.Import:
            for a in node.names:
                self._bind(scope, a.asname or a.name.split(".")[0], node, "import",
                           (a.name if a.asname else a.name.split(".")[0], None))
        elif kind is ast.ImportFrom:
            for a in node.names:
                if a.name == "*":
                    self.wildcards.add(self.stmt)
                    self.star_modules[self.stmt] = "." * node.level + (node.module or "")
                else:
                    self._bind(scope, a.asname or a.name, node, "import",
                               ("." * node.level + (node.module or ""), a.name))
        elif kind is ast.ExceptHandler:
            if node.name:
                self._bind(scope, node.name, node, "other")
            self._children(node, scope, now)
        elif kind in (ast.MatchAs, ast.MatchStar):
            if node.name:
                self._bind(scope, node.name, node, "other")
            self._children(node, scope, now)
        elif kind is ast.MatchMapping:
            if node.rest:
                self._bind(scope, node.rest, node, "other")
            self._children(node, scope, now)
        elif kind in (ast.Assign, ast.AnnAssign) and node.value is not None:
            targets = node.targets if kind is ast.Assign else [node.target]
            self._walk(node.value, scope, now)
            if kind is ast.AnnAssign:
                self._walk(node.annotation, scope, now)
            for target in targets:
                if type(target) is ast.Name:
                    self._bind(scope, target.id, target, "alias", node.value)
                else:
                    if type(target) is ast.Attribute:
                        self.attribute_stores.append((target, node.value, scope))
                        self._walk(target.value, scope, now)
                    else:
                        self._walk(target, scope, now)
                    self._mutation(target, scope, now)
        elif kind is ast.For:
            self._walk(node.iter, scope, now)
            self._targets(node.target, scope, node.iter, scope, (), now)
            for statement in node.body + node.orelse:
                self._walk(statement, scope, now)
        elif kind is ast.AugAssign:
            self._walk(node.value, scope, now)
            if type(node.target) is ast.Name:
                self.reads_list.append(Read(ast.Name(node.target.id, ast.Load(), lineno=node.lineno,
                                                     col_offset=node.col_offset), scope, self.stmt))
            self._walk(node.target, scope, now)
            self._mutation(node.target, scope, now)
        elif kind is ast.Delete:
            for target in node.targets:
                self._walk(target, scope, now)
                self._mutation(target, scope, now)
        elif kind is ast.Expr and type(node.value) is ast.Call and now:
            func = node.value.func
            if type(func) is ast.Name:
                self.calls.append((self.stmt, func, scope))
            else:
                self._mutation(func, scope, now, call=True)
            self._walk(node.value, scope, now)
        elif kind is ast.Expr and type(node.value) is ast.Call:
            self._walk(node.value, scope, now)
        else:
            self._children(node, scope, now)

    def _children(self, node, scope: Scope, now: bool) -> None:
        for child in ast.iter_child_nodes(node):
            self._walk(child, scope, now)

    def _mutation(self, target, scope: Scope, now: bool, call: bool = False) -> None:
        """``x[i] = ...``, ``x.a = ...``, ``del x.a``, ``x.append(...)`` run now: a change of the object ``x``
        names (``call``: by a method call)."""
        if not now or type(target) not in (ast.Subscript, ast.Attribute):
            return
        while type(target) in (ast.Subscript, ast.Attribute, ast.Call):
            target = target.func if type(target) is ast.Call else target.value
        if type(target) is ast.Name:
            self.mutations.append((self.stmt, target, scope, call))

    def _targets(self, target, scope: Scope, iterable, read_in: Scope, at: tuple, now: bool = False) -> None:
        """The names a loop binds to each item of ``iterable`` (read in ``read_in``), by their place in it."""
        if type(target) is ast.Name:
            self._bind(scope, target.id, target, "item", (iterable, read_in, at))
        elif type(target) in (ast.Tuple, ast.List):
            for i, element in enumerate(target.elts):
                self._targets(element, scope, iterable, read_in, at + (i if type(element) is not ast.Starred else "*",),
                              now)
        elif type(target) is ast.Starred:
            self._walk(target.value, scope, now)
        else:
            self._walk(target, scope, now)

    def _function(self, node, scope: Scope) -> None:
        args = node.args
        outer = list(getattr(node, "decorator_list", [])) + args.defaults + [d for d in args.kw_defaults if d]
        if not isinstance(node, ast.Lambda):
            every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
            outer += [a.annotation for a in every if a.annotation] + ([node.returns] if node.returns else [])
        for child in outer:
            self._walk(child, scope)
        if not isinstance(node, ast.Lambda):
            self._bind(scope, node.name, node, "def", node)
        inner = self._scope("function", node, scope)
        positional = args.posonlyargs + args.args
        for i, a in enumerate(positional + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]):
            how = "first" if i == 0 and a in positional and scope.kind == "class" and not isinstance(node, ast.Lambda) \
                else "param"
            self._bind(inner, a.arg, a, how, (node, i))
        for statement in (node.body if isinstance(node.body, list) else [node.body]):
            self._walk(statement, inner)

    def _comprehension(self, node, scope: Scope, now: bool) -> None:
        self._walk(node.generators[0].iter, scope, now)
        inner = self._scope("comprehension", node, scope)
        for i, gen in enumerate(node.generators):
            if i:
                self._walk(gen.iter, inner)
            self._targets(gen.target, inner, gen.iter, scope if i == 0 else inner, ())
            for cond in gen.ifs:
                self._walk(cond, inner)
        for part in ((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)):
            self._walk(part, inner)

    # -- pass 2: where each binding lands, where each read resolves --

    def _finish(self) -> None:
        for scope in self.scopes:
            scope.local = {b.name for b in scope.raw} - scope.globals_ - scope.nonlocals
            if scope.kind == "module":
                scope.local |= scope.globals_
        for scope in self.scopes:
            for b in scope.raw:
                target = scope
                if scope.kind != "module" and b.name in scope.globals_:
                    target = self.module
                elif b.name in scope.nonlocals:
                    target = self.enclosing(scope.parent, b.name)
                b.scope = target
                target.bindings.setdefault(b.name, []).append(b)
        self.where: dict[int, Scope] = {id(r.node): self.resolve(r.scope, r.node.id) for r in self.reads_list}
        n = len(self.statements)
        self.reads: list[set] = [set() for _ in range(n)]
        self.binds: list[set] = [set() for _ in range(n)]
        self.declares: list[set] = [set() for _ in range(n)]  # module names its functions set (global)
        for r in self.reads_list:
            if self.where[id(r.node)] is self.module or r.scope.kind == "class":
                self.reads[r.stmt].add(r.node.id)
        for name, bindings in self.module.bindings.items():
            for b in bindings:
                self.binds[b.stmt].add(name)
                if name == "__builtins__":  # where every name bound nowhere else is then looked up
                    self.wildcards.add(b.stmt)
                if b.written is not self.module and _in_function(b.written):
                    self.declares[b.stmt].add(name)
        for stmt, node, scope, call in self.mutations:
            # an item or attribute set on anything counts (np.allclose = ... changes what np is); a method
            # called on a module is a use of it (torch.manual_seed(0), plt.plot(...)), on a value a change
            bound = self.module.bindings.get(node.id, [])
            if self.resolve(scope, node.id) is self.module and bound and not (
                    call and any(b.how == "import" for b in bound)):
                self.binds[stmt].add(node.id)
        for stmt, node, scope in self.calls:  # init() that sets module names: it binds them when called
            if self.resolve(scope, node.id) is self.module:
                for b in self.module.bindings.get(node.id, []):
                    self.binds[stmt] |= self.declares[b.stmt]

    def resolve(self, scope: Scope, name: str) -> Scope:
        """The scope a read of ``name`` in ``scope`` resolves in (the module: a global, or a builtin)."""
        if scope.kind == "module" or name in scope.globals_:
            return self.module
        if name in scope.local:
            return scope
        return self.enclosing(scope.parent, name)

    def enclosing(self, scope: Scope, name: str) -> Scope:
        """The nearest function (or comprehension) scope from ``scope`` outwards that binds ``name``;
        class scopes are skipped."""
        while scope is not None and scope.kind != "module":
            if scope.kind != "class":
                if name in scope.globals_:
                    return self.module
                if name in scope.local:
                    return scope
            scope = scope.parent
        return self.module

    def reach(self, names: set[str], roots: set[int] = frozenset(), binds=None) -> dict[int, tuple]:
        """The top-level statements that what ``names`` name reaches: those that bind them, then those
        that bind what these read, and so on. ``roots``: statements always included (the release's
        own cells). ``binds(statement, name)``: may that wildcard statement bind that name, which no
        other statement binds (default: it may). {statement: (the name that pulled it in, the statement
        that read it or None)}."""
        binders: dict[str, list[int]] = {}
        for i, bound in enumerate(self.binds):
            for name in bound:
                binders.setdefault(name, []).append(i)
        wildcards = sorted(self.wildcards)  # (they may bind any name that no other statement binds)
        found: dict[int, tuple] = {i: ("", None) for i in roots}
        # (names in sorted order: the name a statement is reached by, which its refusal's path shows, is then
        # the same in every process, whatever the hash seed)
        todo = [(name, None) for name in sorted(names)] + [(name, i) for i in roots for name in sorted(self.reads[i])]
        seen = set(names)
        while todo:
            name, via = todo.pop()
            bound = binders.get(name) or [w for w in wildcards if binds is None or binds(w, name)]
            for i in bound:
                if i not in found:
                    found[i] = (name, via)
                    for read in sorted(self.reads[i] - seen):
                        seen.add(read)
                        todo.append((read, i))
        return found


def _in_function(scope: Scope) -> bool:
    while scope is not None:
        if scope.kind in ("function", "comprehension"):
            return True
        scope = scope.parent
    return False


__all__ = ["Program", "Scope", "Binding", "COMPREHENSIONS"]
