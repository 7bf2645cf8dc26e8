"""Names and scopes: what a name is where it is read, which names may be bound, and which builtins exist.

* *Scopes* are Python's own (:mod:`.scopes`), class bodies included: a name a class body binds is read
  there from the class, else from the module or builtins (``LOAD_NAME``: never from a function around
  the class), so a call there before the class's own binding may call the module's function
  (:meth:`Names._name_kind`).
* *Builtins* (:data:`BUILTINS`): the ones that build objects from strings or reach the machine
  (``getattr``, ``vars``, ``eval``, ``exec``, ``compile``, ``__import__``, ``open``, ``type``, ``id``)
  are not admitted, each refusal saying what to write instead (:data:`ADVICE`); a module-level or
  class-level binding may not hide one (until it runs, the name is the builtin); a function's own
  parameter may (``def f(type)``). Every exception class may be named, raised and caught: what an
  exception carries is read only through the value attributes, where ``args``, ``obj``,
  ``__traceback__`` are not admitted.
* *Dunders*: none is ever bound (``import torch as __builtins__``, ``global __builtins__``), none is read
  but ``__name__``, ``__qualname__``, ``__doc__`` (:data:`DUNDER_READ`) and ``__init__`` (:mod:`.values`);
  a class defines only the ordinary dunder methods (:data:`DUNDER_DEFS`: no ``__getattr__``,
  ``__torch_function__``, ``__class_getitem__``...).
* *Aliases* (``xp = np``, ``Block = Head``): a name for a module, a notebook class or an isinstance-only
  name is admitted where that name names nothing else, and is then resolved statically wherever it is
  read (:meth:`Names._alias`); a class body may not keep one (any code could reach it as a value).
* A name the visible tests find in the kernel and not in the source at hand is what the kernel holds:
  an admitted object, or refused as the library object it is (:meth:`Names._from_namespace`).
"""
import ast
import builtins
import functools
import types

from .kinds import UNBOUND, VALUE, Kind, join
from .library import is_admitted
from .own import WRAPS
from .scopes import Binding, Scope
from .words import YOURSELF

BUILTINS = frozenset("""abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict divmod
enumerate filter float format frozenset hasattr hash hex int isinstance issubclass iter len list map max min next
object oct ord pow print property range repr reversed round set slice sorted staticmethod str sum super tuple zip
NotImplemented Ellipsis None True False""".split()) | {
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException | Warning)}
# (every exception class may be named, raised and caught: what an exception carries is read only through the
# value attributes, where `args`, `obj`, `__traceback__` are not admitted)
DUNDER_READ = {"__name__", "__qualname__", "__doc__"}
DUNDER_DEFS = frozenset("""__init__ __call__ __repr__ __str__ __len__ __getitem__ __setitem__ __iter__ __next__
__contains__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __post_init__ __add__ __radd__ __sub__
__rsub__ __mul__ __rmul__ __matmul__ __rmatmul__ __truediv__ __neg__ __enter__ __exit__""".split())

ADVICE = {  # what to write instead of a builtin the exercises do not admit
    "getattr": "write the attribute itself (mha.in_proj_weight)", "setattr": "assign the attribute itself",
    "delattr": "leave the objects you are given as they are", "vars": "write the attribute itself",
    "dir": "write the attribute itself", "globals": "use the names themselves", "locals": "use the names themselves",
    "eval": "write the code itself", "exec": "write the code itself", "compile": "write the code itself",
    "__import__": "import at the top of the cell (import numpy as np)", "type": "use isinstance(x, torch.Tensor)",
    "open": "the exercises read no files", "input": "the exercises read no input", "id": "compare with `is`",
    "breakpoint": "remove the breakpoint", "memoryview": "use NumPy arrays or tensors",
}


class Names:
    """The rule's methods for names: where a read resolves, what each binding makes of a name, and which
    names may be bound."""

    # -- what a name is --

    def scope_of_read(self, node: ast.Name, scope: Scope) -> Scope:
        return self.p.where.get(id(node)) or self.p.resolve(scope, node.id)

    def name_kind(self, name: str, where: Scope) -> Kind:
        key = (name, id(where))
        kind = self.names.get(key)
        if kind is None:
            kind = self.names[key] = self._name_kind(name, where)
        return kind

    def _name_kind(self, name: str, where: Scope) -> Kind:
        if where is self.p.module:
            kinds = [self.binding_kind(b) for b in where.bindings.get(name, [])]
            if name in vars(builtins) or not kinds:
                kinds.append(self.builtin_kind(name))
            return functools.reduce(join, kinds)
        kinds = [self.binding_kind(b) for b in where.bindings.get(name, [])]
        if where.kind == "class":  # a name a class body binds is read there as Python's LOAD_NAME reads it: the
            kinds.append(self.name_kind(name, self.p.module))  # class's, else the module's or a builtin (never
            #                                                    an enclosing function's, even in a function)
        return functools.reduce(join, kinds) if kinds else VALUE

    def builtin_kind(self, name: str) -> Kind:
        if name in vars(builtins):
            return Kind("static", getattr(builtins, name), name) if name in BUILTINS else Kind("builtin-refused",
                                                                                                text=name)
        return UNBOUND  # never bound: a NameError when it runs

    def binding_kind(self, b: Binding) -> Kind:
        key = id(b)
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            return VALUE
        self.busy.add(key)
        try:
            kind = self._binding_kind(b)
        finally:
            self.busy.discard(key)
        self.memo[key] = kind
        return kind

    def _binding_kind(self, b: Binding) -> Kind:
        if b.how == "import":
            return self._import_kind(b)
        if b.how == "def":  # (functools.wraps(f) returns the function it decorates)
            if all(n == WRAPS for n in self.decorator_names(b.value, b.written)):
                return Kind("func", frozenset({b.value}), b.name)
            return VALUE
        if b.how == "class":
            return Kind("class", frozenset({b.value}), b.name)
        if b.how == "alias":
            kind = self.quiet_kind(b.value, b.written)
            if kind.tag == "own-items" and not self.kept_whole(b):
                return VALUE  # (a list of one's own objects, that something else might change)
            return kind if kind.tag in ("static", "class", "own", "func", "records", "record", "field", "own-items") \
                else VALUE
        if b.how == "item":
            return self.item_kind(b)
        if b.how == "first":
            return self.self_kind(b)
        if b.how == "param":
            return self.param_kind(b)
        if b.how == "del" and b.scope.kind in ("module", "class"):
            return self.builtin_kind(b.name)
        return VALUE

    def decorator_names(self, node, scope: Scope) -> list:
        """The admitted library objects ``node``'s decorators name, as "module.name" (None for any other)."""
        out = []
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            kind = self.quiet_kind(target, scope)
            obj = kind.obj if kind.tag == "static" else None
            out.append(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}" if obj else None)
        return out

    # -- a name read --

    def _is_method_name(self, node: ast.Name, scope: Scope) -> bool:
        where = self.scope_of_read(node, scope)
        return where.kind == "class" and any(b.how == "def" for b in where.bindings.get(node.id, []))

    def _name(self, node: ast.Name, scope: Scope, quiet: bool) -> Kind:
        name = node.id
        where = self.scope_of_read(node, scope) if isinstance(node.ctx, ast.Load) else self._bound_where(scope, name)
        if not isinstance(node.ctx, ast.Load):
            if not quiet:
                self._binding_name(node, name, where)
            return VALUE
        if name.startswith("__") and name.endswith("__") and not where.bindings.get(name):
            if name in DUNDER_READ:
                return VALUE
            if not quiet:
                self.refuse(node, f"`{name}` reaches Python's internals, which the exercises do not need; use "
                                  "the arguments you are given and NumPy/torch functions.")
            return VALUE
        if where.kind == "class" and not quiet and self._is_method_name(node, scope):
            self.refuse(node, f"the method `{name}` may be used in its class only through an instance "
                              f"(self.{name}(...)): read bare, it could be called on any object.")
            return VALUE
        if where is self.p.module and self.namespace is not None and not where.bindings.get(name) and \
                name in self.namespace and name not in vars(builtins):
            return self._from_namespace(node, self.namespace[name], quiet)
        return self.name_kind(name, where)

    def _from_namespace(self, node: ast.Name, obj, quiet: bool) -> Kind:
        """A name the visible tests find in the kernel (bound in a cell the source at hand does not hold)."""
        if is_admitted(obj):
            return Kind("static", obj, node.id)
        library = isinstance(obj, types.ModuleType | types.BuiltinFunctionType | type) or (
            isinstance(obj, types.FunctionType) and obj.__module__ not in (None, "__main__"))
        if library and str(getattr(obj, "__module__", "")) != "__main__" and not quiet:
            name = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__name__', '')}".strip(".")
            self.refuse(node, f"`{node.id}` is `{name}`, which the exercises do not admit: a ready-made answer, or "
                              f"a way to one, earns no credit; {YOURSELF}.")
        return VALUE

    # -- a name bound --

    def _binding_name(self, node, name: str, where: Scope, method: bool = False) -> None:
        """A name bound in ``where``: never a dunder (but a class's ordinary dunder methods); at module level
        never the name of a builtin the exercises do not admit (a read of it may still be the builtin: a
        class body's reads of such a name are refused where they are)."""
        if name.startswith("__") and name.endswith("__") and not (method and name in DUNDER_DEFS):
            self.refuse(node, f"`{name}` is one of Python's own names (binding it changes how Python "
                              "resolves names or treats objects); name your variable something else.")
        elif where.kind == "module" and name in vars(builtins) and name not in BUILTINS:
            self.refuse(node, f"`{name}` is the name of a builtin the exercises do not admit, and at the "
                              f"notebook's top level the builtin is what `{name}` names until this line runs; name "
                              "it something else (a function's own parameters and variables may use the name).")

    def _bound_where(self, scope: Scope, name: str) -> Scope:
        if scope.kind != "module" and name in scope.globals_:
            return self.p.module
        if name in scope.nonlocals:
            return self.p.enclosing(scope.parent, name)
        return scope

    def _declare(self, node: ast.Global | ast.Nonlocal, scope: Scope) -> None:
        """``global x`` / ``nonlocal x``: the names it binds there are judged as bindings."""
        for name in node.names:
            self._binding_name(node, name, self.p.module if isinstance(node, ast.Global) else scope)

    def _assign(self, node: ast.Assign | ast.AnnAssign, scope: Scope) -> None:
        if scope.kind == "class" and isinstance(node.value, ast.Name) and self._is_method_name(node.value, scope):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                self._expr(t, scope)  # `__call__ = forward`: another name for a method, still bound
            return None
        if node.value is not None and self._alias(node, scope):
            return None
        if isinstance(node, ast.AnnAssign):
            self._expr(node.target, scope)
            self._expr(node.annotation, scope, annotation=True)
            if node.value is not None:
                self._expr(node.value, scope, field_ok=scope.kind == "class" and isinstance(node.value, ast.Call)
                           and "dataclasses.dataclass" in self.decorator_names(scope.node, scope.parent))
            return None
        self._children(node, scope)

    def _alias(self, node, scope: Scope) -> bool:
        """``xp = np``, ``Block = Head``: a name for a module, a class or an isinstance-only name, admitted
        where that name names nothing else (then it is resolved statically wherever it is read). True when
        handled here."""
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = self.quiet_kind(node.value, scope)
        if not (value.module or value.not_called or value.tag == "class") or \
                not all(isinstance(t, ast.Name) for t in targets):
            return False
        self._expr(node.value, scope, module_ok=True, class_ok=True, classinfo=value.not_called)
        for t in targets:
            where = self._bound_where(scope, t.id)
            self._binding_name(t, t.id, where)
            if where.kind == "class":
                self.refuse(t, f"`{t.id}` would keep `{self.text(node.value)}` as a class attribute, where any "
                               "code could reach it as a value; name it at the notebook's top level instead.")
            elif self.name_kind(t.id, where).tag == "conflict":
                self.refuse(t, f"`{t.id}` names `{self.text(node.value)}` here and something else elsewhere (in "
                               "another cell, or before this line runs); give each its own name.")
        if isinstance(node, ast.AnnAssign):
            self._expr(node.annotation, scope, annotation=True)
        return True
