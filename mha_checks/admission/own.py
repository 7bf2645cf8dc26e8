"""What counts as the student's own object, on which any name but its library bases' machinery may be read.

On a value the rule admits only the generated attributes (:mod:`.values`); on the student's own object,
every name the student's code can set, because the grader *knows* the object is the student's. It knows
so only for:

* ``self`` (or ``cls``) in a method of a notebook class whose decorators keep it bound (:data:`KEEP_BOUND`:
  ``property``, ``functools.cache``, ``torch.no_grad()``...; no decorator of the student's own can hand
  the bare function to anything), and ``super()`` (:meth:`OwnObjects.self_kind`, :mod:`.calls`);
* a name bound only to a call of a notebook class, or of a notebook function whose every return is one
  (:meth:`OwnObjects.returns`);
* an attribute of an own object that only ever holds one (:meth:`OwnObjects.own_attrs`);
* a parameter that every call passes one, of a function that cannot be called otherwise: never read but
  to be called, bound once, not graded (the grader calls it), no decorator of the student's own
  (:meth:`OwnObjects.sites`, :meth:`OwnObjects.param_kind`).

"Only ever holds one" counts every writer, the library's included: a name the library may set on an
object of a notebook class is never known to be the student's (:meth:`OwnObjects.library_sets`:
``admitted.LIBRARY_HELD``, what the base classes and their instances hold, StopIteration's ``value``,
nn.Module's ``_modules``; a dataclass's or NamedTuple's fields, which their constructors set; any name
at all where a container keyed by names is a base, a layer is registered under a name given at run
time, or ``functools.wraps`` copies attributes). On its own object the student may read any name except
the machinery its library base classes bring (``admitted.OWN_REFUSED``; a private ``_name`` only when
the notebook itself binds it there: :meth:`OwnObjects.private_names`). Never is a name admitted because
it is "public and on no known type". How a notebook class itself may be used, so that no library object
can become ``self``, is :mod:`.classes`.
"""
import ast
import functools

from . import admitted
from .kinds import OWN, VALUE, Kind, join
from .library import imported
from .scopes import Binding, Scope
from .words import family_text

KEEP_BOUND = {"builtins.property", "functools.cached_property", "functools.lru_cache", "functools.cache",
              "functools.wraps", "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.enable_grad",
              "torch.autograd.grad_mode.inference_mode"}  # method decorators that keep `self` bound to the instance
STATIC, CLASS, WRAPS = "builtins.staticmethod", "builtins.classmethod", "functools.wraps"
REGISTERS = {"register_module", "add_module", "register_buffer", "register_parameter", "set_submodule"}


def machinery(text: str, attr: str) -> str:
    """The refusal of a library base class's machinery (admitted.OWN_REFUSED) read on the student's object."""
    return (f"`{text}`: `.{attr}` is machinery of the library class your class derives from "
            f"({family_text(attr)}); name your own attribute differently.")


class OwnObjects:
    """The rule's methods that decide when a value is known to be the student's own object."""

    def self_kind(self, b: Binding) -> Kind:
        """``self`` of a method is the student's own object when the method stays bound (no decorator
        of the student's own can hand the bare function to anything)."""
        method, _ = b.value
        names = self.decorator_names(method, b.written.parent)
        if STATIC in names:
            return self.param_kind(b)
        if CLASS in names:
            return Kind("class", frozenset({b.written.parent.node}), "cls") if len(names) == 1 else VALUE
        if all(n in KEEP_BOUND for n in names):
            return OWN
        return VALUE

    # -- which calls pass what (a parameter is the student's own object when every call says so) --

    def sites(self) -> dict:
        """{id(def node): [(Call, scope, offset)]}: every call of each function (offset 0) and of each class
        (offset 1, for its ``__init__``), or None for one that escapes: read other than by a call, bound
        twice, a graded function (the grader calls it), a method (called through instances), or the
        ``__init__`` of a class that is subclassed."""
        if self._sites is not None:
            return self._sites
        sites: dict = {}
        escaped: set = set()

        def target(b: Binding):
            if b.how == "def":
                return b.value, 0
            return (_method(b.value, "__init__"), 1) if b.how == "class" else (None, 0)

        for call, scope, _ in self.p.call_list:
            if isinstance(call.func, ast.Name):
                for b in self._bindings_read(call.func, scope):
                    node, offset = target(b)
                    if node is not None:
                        sites.setdefault(id(node), []).append((call, scope, offset))
                    if b.how == "def" and not all(n in KEEP_BOUND for n in self.decorator_names(b.value, b.written)):
                        escaped.add(id(b.value))  # a decorator of its own may call it with anything
        defined: dict[tuple, list] = {}  # (scope, name) -> the functions and classes bound to it there
        for scope in self.p.scopes:
            for name, bindings in scope.bindings.items():
                targets = [id(target(b)[0]) for b in bindings if b.how in ("def", "class")]
                if targets:
                    defined[(id(scope), name)] = targets
                if targets and (len(bindings) > 1 or (scope is self.p.module and name in self.graded)):
                    escaped.update(targets)
        for read in self.p.reads_list:
            where = self.p.where.get(id(read.node))
            if id(read.node) not in self.p.called and where is not None:
                for scope in [where] + ([self.p.module] if where.kind == "class" else []):
                    escaped.update(defined.get((id(scope), read.node.id), ()))
        for scope in self.p.scopes:
            if scope.kind == "class":
                escaped |= {id(st) for st in scope.node.body if isinstance(st, ast.FunctionDef)
                            and st.name != "__init__"}
                for base in scope.node.bases:  # a subclass's call reaches its bases' __init__ too
                    kind = self.quiet_kind(base, scope.parent)
                    if kind.tag == "class":
                        escaped |= {id(_method(c, "__init__")) for c in kind.obj}
        for key in escaped:
            sites[key] = None
        self._sites = sites
        return sites

    def _bindings_read(self, node: ast.Name, scope: Scope) -> list:
        """The bindings a read of ``node`` may find: in a class body, a name the class binds may still be the
        module's (or a builtin) when it is read before the class's own binding runs."""
        where = self.scope_of_read(node, scope)
        found = list(where.bindings.get(node.id, []))
        if where.kind == "class":
            found += self.p.module.bindings.get(node.id, [])
        return found

    def param_kind(self, b: Binding) -> Kind:
        node, position = b.value
        if isinstance(node, ast.Lambda):
            return VALUE
        calls = self.sites().get(id(node))
        if not calls:
            return VALUE
        args = node.args
        positional = args.posonlyargs + args.args
        arg = (positional + args.kwonlyargs)[position] if position < len(positional) + len(args.kwonlyargs) \
            else None
        if arg is None:
            return VALUE
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        kind = None
        for call, scope, offset in calls:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return VALUE
            given = None
            if arg in positional and positional.index(arg) - offset >= 0:
                j = positional.index(arg) - offset
                given = call.args[j] if j < len(call.args) else None
            given = given or next((k.value for k in call.keywords if k.arg == arg.arg), None)
            if given is None:
                if arg.arg not in defaults:
                    return VALUE
                k = self.quiet_kind(defaults[arg.arg], self.p.scope_of[id(node)].parent)
            else:
                k = self.quiet_kind(given, scope)
            if k.tag != "own":
                return VALUE
            kind = k
        return kind or VALUE

    def returns(self, node) -> Kind:
        """What a call of the notebook function ``node`` returns: OWN when every way out of it returns one of
        the student's own objects (whatever it was given), else VALUE."""
        key = ("returns", id(node))
        if key in self.names:
            return self.names[key]
        self.names[key] = VALUE  # (a recursive call: a value)
        kind = VALUE
        if isinstance(node, ast.FunctionDef) and node.body and isinstance(node.body[-1], ast.Return | ast.Raise):
            scope = self.p.scope_of[id(node)]
            found, plain = [], True
            todo = list(node.body)
            while todo and plain:
                st = todo.pop()
                if isinstance(st, ast.Return):
                    found.append(self.quiet_kind(st.value, scope) if st.value is not None else VALUE)
                elif isinstance(st, ast.Yield | ast.YieldFrom | ast.Await):
                    plain = False
                if not isinstance(st, ast.FunctionDef | ast.ClassDef | ast.Lambda | ast.AsyncFunctionDef):
                    todo += ast.iter_child_nodes(st)
            if plain and found and all(k.tag == "own" for k in found):
                kind = OWN
        self.names[key] = kind
        return kind

    # -- what an own object holds --

    def own_attrs(self) -> dict:
        """{attribute: kind} of what the notebook's own objects hold under each name (assignments to an
        attribute of an own object, class-level names, layers registered by name)."""
        if self._own_attrs is not None:
            return self._own_attrs
        self._own_attrs = {}
        kinds: dict[str, Kind] = {}
        stores = [(t.attr, t.value, value, scope) for t, value, scope in self.p.attribute_stores]
        for call, scope, _ in self.p.call_list:  # self.register_module('attn', layer): an attribute by its name
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in REGISTERS:
                name = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
                if not isinstance(name, str) or self.quiet_kind(func.value, scope).tag == "static":
                    self._any_name = True  # (a name given at run time, or by keyword; through the library's class)
                    continue
                value = call.args[1] if len(call.args) > 1 else None
                stores.append((name.rpartition(".")[2], func.value, value, scope))
        for attr, base_node, value, scope in stores:
            base = self.quiet_kind(base_node, scope)
            if base.tag in ("own", "func", "class"):
                k = self.quiet_kind(value, scope) if value is not None else VALUE
                kinds[attr] = join(kinds[attr], k) if attr in kinds else k
        for scope in self.p.scopes:
            if scope.kind == "class":
                for name, bindings in scope.bindings.items():
                    for b in bindings:
                        k = self.binding_kind(b) if b.how != "def" else VALUE
                        kinds[name] = join(kinds[name], k) if name in kinds else k
        self._own_attrs = kinds
        return kinds

    def library_sets(self, attr: str) -> bool:
        """May the library, not the notebook's own code, set ``attr`` on an object of a notebook class? It may
        for every name its base classes hold (admitted.LIBRARY_HELD: StopIteration's ``value``, a layer's
        ``weight``, nn.Module's ``_modules``), for a field of a dataclass or a NamedTuple (their generated
        constructors store whatever they are given: any annotated class-level name counts), and for any name
        in a notebook that derives from a container keyed by names (ParameterDict...), registers a layer
        under a name given at run time, or uses functools.wraps (it copies an object's attributes)."""
        if self._any_name is None:
            self.own_attrs()
            keyed = tuple(getattr(imported("torch.nn"), n) for n in admitted.KEYED_BASES)
            fields, any_name = set(), bool(self._any_name)
            for scope in self.p.scopes:
                if scope.kind != "class":
                    continue
                fields |= {st.target.id for st in scope.node.body
                           if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
                for base in scope.node.bases:
                    kind = self.quiet_kind(base, scope.parent)
                    any_name |= kind.tag == "static" and isinstance(kind.obj, type) and issubclass(kind.obj, keyed)
            any_name |= "wraps" in self.p.attribute_loads or any(
                b.how == "import" and b.value[1] == "wraps" for sc in self.p.scopes for bs in sc.bindings.values()
                for b in bs)
            self._fields, self._any_name = frozenset(fields), any_name
        return self._any_name or attr in admitted.LIBRARY_HELD or attr in self._fields

    # -- an attribute of an own object --

    def _own_read(self, node: ast.Attribute, refuse) -> Kind:
        """``obj.name`` on the student's own object: any name but its library bases' machinery."""
        attr = node.attr
        if attr in admitted.OWN_REFUSED:
            refuse(machinery(self.text(node), attr))
            return VALUE
        return self._own_attribute(attr)

    def _own_attribute(self, attr: str) -> Kind:
        kind = self.own_attrs().get(attr)
        return kind if kind is not None and kind.tag == "own" and not self.library_sets(attr) else VALUE

    def _own_name(self, attr: str) -> bool:
        return attr in self.own_attrs() or attr in self.methods()

    @functools.cached_property
    def _private(self) -> frozenset:
        names = {t.attr for t, _, _ in self.p.attribute_stores if t.attr.startswith("_")}
        for scope in self.p.scopes:
            if scope.kind == "class":
                names |= {n for n in scope.bindings if n.startswith("_") and not n.startswith("__")}
        return frozenset(names)

    def private_names(self) -> frozenset:
        """The private names the notebook itself binds on its own objects (the only ones it may read)."""
        return self._private


def _method(cls: ast.ClassDef, name: str):
    return next((st for st in cls.body if isinstance(st, ast.FunctionDef) and st.name == name), None)
