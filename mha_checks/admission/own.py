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
  (:meth:`OwnObjects.sites`, :meth:`OwnObjects.param_kind`);
* an item of the student's own items (:meth:`OwnObjects.item_kind`): a loop's target, an index or ``next``
  of a generator whose every ``yield`` gives one (:meth:`OwnObjects.yields`), or of a list, tuple or
  comprehension of them (:meth:`OwnObjects.display_kind`), through ``enumerate``, ``zip``, ``list``,
  ``reversed``...; a name (or an own object's attribute) holding such items keeps them only where nothing
  can change them: it is read only to be iterated, indexed, counted or handed to those
  (:meth:`OwnObjects.kept_whole`).

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
from .kinds import OWN, OWN_ITEMS, VALUE, Kind, join
from .library import imported
from .scopes import COMPREHENSIONS, Binding, Scope
from .words import family_text

KEEP_BOUND = {"builtins.property", "functools.cached_property", "functools.lru_cache", "functools.cache",
              "functools.wraps", "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.enable_grad",
              "torch.autograd.grad_mode.inference_mode"}  # method decorators that keep `self` bound to the instance
STATIC, CLASS, WRAPS = "builtins.staticmethod", "builtins.classmethod", "functools.wraps"
READ_ONLY = (len, enumerate, zip, reversed, list, tuple, sorted, iter, next)  # they read items, change nothing
KEEP_ITEMS = (list, tuple, reversed, sorted, iter)  # what they return holds the same items
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
        ``__init__`` of a class that is subclassed, read as ``X.__init__`` (but ``super().__init__``), or
        whose objects the libraries build again with arguments of their own (:meth:`_rebuilt`)."""
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
                if self._rebuilt(scope):
                    escaped.add(id(_method(scope.node, "__init__")))
        escaped |= self._inits_read()
        for key in escaped:
            sites[key] = None
        self._sites = sites
        return sites

    def _rebuilt(self, scope: Scope) -> bool:
        """Do the libraries build objects of this class again, calling its ``__init__`` with arguments of their
        own? A dataclass's (dataclasses.replace passes the fields it finds), an exception's (a copy calls the
        class with the ``args`` it holds, which the notebook may set), a container layer's (a slice of a
        ModuleList or a Sequential is built by calling its class). Only a plain class, a layer, a container of
        Python's or a tensor keeps its ``__init__`` to the notebook's own calls."""
        if "dataclasses.dataclass" in self.decorator_names(scope.node, scope.parent):
            return True
        keyed = tuple(getattr(imported("torch.nn"), n) for n in admitted.KEYED_BASES)
        for base in scope.node.bases:
            kind = self.quiet_kind(base, scope.parent)
            if kind.tag == "static" and isinstance(kind.obj, type) and issubclass(kind.obj, (BaseException, *keyed)):
                return True
        return False

    def _inits_read(self) -> set:
        """The ``__init__``s that a read ``X.__init__`` may call with what it is given (the rule admits it with the
        student's own object first, whatever follows): X's, if X is a notebook class; none for a library class
        or ``super()``; every class's for anything else."""
        read_in = {id(r.node): r.scope for r in self.p.reads_list}
        every = {id(_method(s.node, "__init__")) for s in self.p.scopes if s.kind == "class"}
        out = set()
        for node in self.p.attribute_loads.get("__init__", []):
            base, leftmost = node.value, node.value
            while isinstance(leftmost, ast.Attribute | ast.Call | ast.Subscript):
                leftmost = leftmost.func if isinstance(leftmost, ast.Call) else leftmost.value
            scope = read_in.get(id(leftmost))
            kind = self.quiet_kind(base, scope) if scope is not None else VALUE
            if kind.tag == "static" or isinstance(base, ast.Call) and kind.tag == "own" and isinstance(
                    base.func, ast.Name) and self.quiet_kind(base.func, scope).obj is super:
                continue
            out |= {id(_method(c, "__init__")) for c in kind.obj} if kind.tag == "class" else every
        return out

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

    # -- the student's own items --

    def yields(self, node) -> Kind:
        """What a call of the notebook generator function ``node`` gives: OWN_ITEMS when every ``yield`` gives one
        of the student's own objects (``yield from`` such items), else VALUE."""
        key = ("yields", id(node))
        if key in self.names:
            return self.names[key]
        self.names[key] = VALUE  # (a recursive call: a value)
        scope, found = self.p.scope_of[id(node)], []
        todo = list(node.body)
        while todo:
            st = todo.pop()
            if isinstance(st, ast.Yield):
                found.append(OWN if st.value is not None and self.quiet_kind(st.value, scope).tag == "own" else VALUE)
            elif isinstance(st, ast.YieldFrom):
                found.append(OWN if self.quiet_kind(st.value, scope).tag == "own-items" else VALUE)
            if not isinstance(st, ast.FunctionDef | ast.ClassDef | ast.Lambda | ast.AsyncFunctionDef) and not (
                    isinstance(st, ast.expr) and type(st) in COMPREHENSIONS):
                todo += ast.iter_child_nodes(st)
        kind = OWN_ITEMS if found and all(k is OWN for k in found) else VALUE
        self.names[key] = kind
        return kind

    def display_kind(self, node, scope: Scope) -> Kind:
        """A list, tuple or set written out, or a comprehension: OWN_ITEMS when every item is the student's own."""
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            own = node.elts and all(self.quiet_kind(e.value, scope).tag == "own-items" if isinstance(e, ast.Starred)
                                    else self.quiet_kind(e, scope).tag == "own" for e in node.elts)
            return OWN_ITEMS if own else VALUE
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return OWN_ITEMS if self.quiet_kind(node.elt, self.p.scope_of[id(node)]).tag == "own" else VALUE
        return VALUE

    def item_kind(self, b: Binding) -> Kind:
        """A loop's target: what is at its place in each item of the iterable."""
        iterable, read_in, at = b.value
        items = self._items_of(iterable, read_in)
        for place in at:
            items = items[place] if isinstance(items, tuple) and isinstance(place, int) and place < len(items) \
                else VALUE
        return items if isinstance(items, Kind) else VALUE

    def _items_of(self, node, scope: Scope):
        """What each item of ``node`` is: OWN, VALUE, or a tuple of them (``enumerate``, ``zip``)."""
        if self.quiet_kind(node, scope).tag == "own-items":
            return OWN
        if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args):
            func = self.quiet_kind(node.func, scope)
            words = {k.arg for k in node.keywords}
            if func.obj is enumerate and len(node.args) in (1, 2) and words <= {"start"}:
                return VALUE, self._items_of(node.args[0], scope)
            if func.obj is zip and words <= {"strict"}:
                return tuple(self._items_of(a, scope) for a in node.args)
        return VALUE

    def kept_whole(self, b: Binding) -> bool:
        """Is the name ``b`` binds read only where nothing can change what it holds: iterated, indexed, counted,
        or handed to the functions that only read items (:data:`READ_ONLY`)? (Then what it holds stays the
        student's own items; anywhere else, a method call or a function could add anything to it.)"""
        return all(self._only_read(r.node) for r in self.p.reads_list
                   if r.node.id == b.name and self.p.where.get(id(r.node)) is b.scope)

    def _only_read(self, node) -> bool:
        parent = self.parents().get(id(node))
        if isinstance(parent, ast.For | ast.comprehension):
            return parent.iter is node
        if isinstance(parent, ast.Subscript):
            return parent.value is node and isinstance(parent.ctx, ast.Load)
        if isinstance(parent, ast.Compare):
            return node in parent.comparators
        if isinstance(parent, ast.Call) and node in parent.args:
            func = self.quiet_kind(parent.func, self.p.module) if isinstance(parent.func, ast.Name) else VALUE
            return func.tag == "static" and any(func.obj is f for f in READ_ONLY)
        return False

    def parents(self) -> dict:
        """{id(node): its parent} over the whole program (built once, when first needed)."""
        if self._parents is None:
            self._parents = {id(child): parent for _, statement in self.p.statements for parent in ast.walk(statement)
                             for child in ast.iter_child_nodes(parent)}
        return self._parents

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
        stored = {attr for attr, _, _, _ in stores}
        self._own_attrs = {  # (seen while the stores are read: the classes a class body binds, which no code
            name: Kind("class", frozenset(b.value for b in bindings), name)  # stores over, are final already)
            for scope in self.p.scopes if scope.kind == "class" for name, bindings in scope.bindings.items()
            if name not in stored and all(b.how == "class" for b in bindings) and not any(
                name in other.bindings for other in self.p.scopes if other.kind == "class" and other is not scope)}
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

    def _own_attribute(self, attr: str, on_class: bool = False) -> Kind:
        """What an own object (or, ``on_class``, a notebook class) holds under ``attr``: the student's own object
        where only the notebook's code writes it, always one; a notebook class where its body binds one
        (``class Inner`` in a class: read as ``Outer.Inner`` or ``self.Inner``, it is that class, never a
        value); a conflict where it may be a class or something else (refused where it is used); else a value.
        (The libraries set names on objects, not on the notebook's classes: read from a class, a class is one.)"""
        kind = self.own_attrs().get(attr)
        if kind is None:
            return VALUE
        if kind.tag == "own" and not self.library_sets(attr) or kind.tag == "class" and (
                on_class or not self.library_sets(attr)):
            return kind
        if kind.tag == "own-items" and not self.library_sets(attr) and all(
                self._only_read(n) for n in self.p.attribute_loads.get(attr, [])):
            return kind
        return Kind("conflict", text=attr) if kind.tag in ("class", "conflict") else VALUE

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
