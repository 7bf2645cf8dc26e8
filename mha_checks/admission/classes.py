"""The notebook's classes: how one is defined, and how it and its methods may be used.

The danger of a class is ``self``: a method, or a library base class's function, called with a library
object as ``self`` runs the student's code (or the library's unchecked code) on it, and the rule would
then take that object for the student's own (:mod:`.own`). So:

* A class is defined with the ordinary syntax only: bases among the notebook's classes, ``object``, the
  containers, the exceptions, ``typing.NamedTuple``, torch's ``nn.Module`` and ``Tensor`` and the layers
  (:func:`base_class`; what their instances inherit is on the generated lists), named directly; no
  metaclass or other class keyword; no decorator but :data:`CLASS_DECORATORS` (a decorator receives the
  class itself). Its dunder methods are the ordinary ones (``names.DUNDER_DEFS``).
* A notebook class or method never escapes into a value: it is only called, subclassed, named in
  ``isinstance``, or read as ``Class.attribute`` (:meth:`~.syntax.Syntax._expr`, ``names``: a method read
  bare in its class body), so no library object can become ``self``. A class defined in a class body is
  read as ``Outer.Inner`` or ``self.Inner`` as the class it is (:meth:`.own.OwnObjects._own_attribute`),
  never under a name the values' attributes use (any object of the outer class, a value, would hand it
  out), nor bound by ``case Outer(Inner=c)``; and the libraries keep no reference to a notebook class where
  a value reaches it: a dataclass's ``Field`` (which its decorator fills with the annotation's object) is
  never a value (:mod:`.calls`). ``tests/test_admission_closure.py`` proves it on the live objects: the
  walk starts from every form of class a notebook defines (:mod:`.shapes`).
* Read from a class (a notebook class, ``cls``, or a library base class), a method of the notebook's,
  ``__init__``, and any name the class does not bind in its own body or a notebook base's (the library
  base's or ``type``'s function, which takes any object as self) is only called, with the student's own
  object first (``Base.__init__(self, ...)``: :meth:`Classes._self_first`), and never is a name of
  ``admitted.OWN_REFUSED``. A library class's ``__init__`` sets only the names its instances hold
  (``admitted.LIBRARY_HELD``), so it may run on the student's object, for a base class only.
"""
import ast
import sys
import typing

from . import admitted
from .kinds import VALUE, Kind
from .library import not_called
from .own import CLASS, STATIC, machinery
from .scopes import Scope

CLASS_DECORATORS = {"dataclasses.dataclass", "functools.total_ordering"}  # (they return the class itself)


def base_class(obj) -> bool:
    """May a notebook class derive from ``obj``? (What its instances inherit from it is on the generated
    lists: admitted.VALUE_ATTRIBUTES, or refused by admitted.OWN_REFUSED.)"""
    if obj is typing.NamedTuple or obj in (object, dict, list, tuple, set):
        return True
    if not isinstance(obj, type):
        return False
    if issubclass(obj, BaseException):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(obj, torch.nn.Module | torch.Tensor) and not not_called(obj)


class Classes:
    """The rule's methods for class statements, and for what is read from a class."""

    def _class(self, node: ast.ClassDef, scope: Scope) -> None:
        inner = self.p.scope_of[id(node)]
        self._binding_name(node, node.name, self._bound_where(scope, node.name))
        if scope.kind == "class" and node.name in admitted.VALUE_ATTRIBUTES:
            self.refuse(node, f"the class `{node.name}` inside a class is named like an attribute of the values the "
                              f"exercises use (`.{node.name}`): read through any object of the outer class, it "
                              "would be a value whose methods could be called on any object; name it otherwise.")
        names = self.decorator_names(node, scope)
        for d, name in zip(node.decorator_list, names):
            self._expr(d, scope)
            if name not in CLASS_DECORATORS:
                self.refuse(d, f"the class decorator `{self.text(d)}` is not admitted: a decorator receives the "
                               "class itself, and could call its methods on any object; write @dataclass or "
                               "no decorator.")
        for base in node.bases:
            kind = self._expr(base, scope, class_ok=True)
            if not (kind.tag == "class" or (kind.tag == "static" and base_class(kind.obj))):
                self.refuse(base, f"the base class `{self.text(base)}` must be one of your classes, object, a "
                                  "container, an exception, typing.NamedTuple, or torch's nn.Module (a layer) or "
                                  "Tensor, named directly (class Head(torch.nn.Module)).")
        if node.keywords:
            self.refuse(node, f"class keywords ({self.text(node.keywords[0])}) are not admitted (a metaclass "
                              f"changes how Python builds the class); write `class {node.name}(Base):`.")
        for st in node.body:
            self._stmt(st, inner)

    def methods(self) -> dict:
        """{name: [def nodes]} of the methods (taking self) of the notebook's classes."""
        if self._methods is None:
            self._methods = {}
            for scope in self.p.scopes:
                if scope.kind == "class":
                    for st in scope.node.body:
                        if isinstance(st, ast.FunctionDef):
                            names = self.decorator_names(st, scope.parent)
                            if STATIC not in names and CLASS not in names:
                                self._methods.setdefault(st.name, []).append(st)
        return self._methods

    # -- read from a class --

    def _class_attribute(self, node: ast.Attribute, base: Kind, call, scope: Scope, refuse) -> Kind:
        """``Class.name`` of a notebook class (or ``cls``)."""
        attr = node.attr
        if attr in admitted.OWN_REFUSED:
            refuse(machinery(self.text(node), attr))
            return VALUE
        inherited = not self._class_binds(base.obj, attr)  # (from a library base, or from `type` itself)
        if (attr in self.methods() or inherited) and not self._self_first(node, call, scope):
            refuse(f"`{self.text(node)}`: a method read from the class may be called only with self first "
                   f"({self.text(node)}(self, ...)); call it on an instance"
                   + (f" (`.{attr}` is not bound in your class's body: read from the class, the library's "
                      "function would accept any object as self)." if inherited else "."))
            return VALUE
        return VALUE if inherited else self._own_attribute(attr, on_class=True)

    def _class_init(self, node: ast.Attribute, call, scope: Scope, refuse) -> Kind:
        """``Class.__init__`` of a notebook class or of a library base class: it runs on whatever object it is
        given first, so only the student's own."""
        if self._self_first(node, call, scope):
            return VALUE  # (read from a class, __init__ runs on whatever object it is given first)
        refuse(f"`{self.text(node)}` may be called only with your own object first "
               f"({self.text(node)}(self, ...)): given another object, it would run with that object as "
               "self; call the class itself, or super().__init__(...).")
        return VALUE

    def _self_first(self, node: ast.Attribute, call, scope: Scope) -> bool:
        """Is ``node`` (``Class.name``) called here with the student's own object first (``Class.name(self, ...)``)?"""
        return call is not None and call.func is node and bool(call.args) and not isinstance(
            call.args[0], ast.Starred) and self._kind(call.args[0], scope, True).tag == "own"

    def _class_binds(self, classes: frozenset, attr: str) -> bool:
        """Does every one of the notebook ``classes`` bind ``attr`` in its own body or in a notebook base's?
        (Anything else read from a class comes from a library base class or from ``type``.)"""
        def binds(cls, seen) -> bool:
            if id(cls) in seen:
                return False
            seen.add(id(cls))
            scope = self.p.scope_of[id(cls)]
            if scope.bindings.get(attr):
                return True
            for base in cls.bases:
                kind = self.quiet_kind(base, scope.parent)
                if kind.tag == "class" and all(binds(c, seen) for c in kind.obj):
                    return True
            return False
        return bool(classes) and all(binds(c, set()) for c in classes)
