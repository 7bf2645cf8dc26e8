"""Values and their attributes: what may be read from, set on, or matched against a value.

A value is everything computed at run time (a tensor, an array, a number, a container, what a call
returns). Its attribute is admitted only when its name is on ``admitted.VALUE_ATTRIBUTES`` (the public
attributes of tensors, arrays, their scalars, dtypes, devices, sizes, named tuples, generators,
containers, strings, numbers, torch's layers and the exercise-5 stand-in, by family, generated from the
pinned libraries), or is a field of a ``collections.namedtuple`` whose fields are written out (an item
of the tuple: :mod:`.calls`). A name left out is refused with its family's reason; never is a name
admitted because it is "public and on no known type". The one exception is the student's own object,
on which any name but the library bases' machinery is read (:mod:`.own`).

:meth:`Values._attribute` reads ``base.name`` in this order, each case with its rule:

1. a dunder: ``__name__``, ``__qualname__``, ``__doc__``, ``super().__init__``, and ``__init__`` read from
   a notebook class or a library base class, called with the student's own object first
   (:meth:`.classes.Classes._class_init`); no other (they reach Python's and torch's machinery; an own
   object's ``__init__`` called again would hand its parameters what the rule never saw);
2. a private ``_name``: only on the student's own object, where the notebook itself binds it
   (``admitted.OWN_PRIVATE_REFUSED`` never);
3. a name set (``x.name = ...``): on the student's own objects (and the notebook's functions and
   classes), and an array's or tensor's :data:`STORED` data attributes; the libraries' objects never;
4. a module's member (:mod:`.imports`), then a class's attribute (:mod:`.classes`), then an own
   object's (:mod:`.own`), then a value's.

``case Class(attr=...)`` reads attributes too (:meth:`Values._match_class`): the same names, and
positional patterns only where ``__match_args__`` are all admitted (:data:`SELF_MATCH`: the builtins
that match themselves).
"""
import ast

from . import admitted
from .classes import base_class
from .kinds import UNBOUND, VALUE, Kind
from .names import DUNDER_READ
from .scopes import Scope
from .words import YOURSELF, family

VALUE_ATTRIBUTES = admitted.VALUE_ATTRIBUTES
STORED = {"shape", "data", "requires_grad", "grad"}  # data attributes of arrays and tensors a student may set
SELF_MATCH = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


class Values:
    """The rule's methods for attributes and class patterns."""

    def _attribute(self, node: ast.Attribute, scope: Scope, quiet: bool, annotation: bool, call) -> Kind:
        attr = node.attr
        loads = isinstance(node.ctx, ast.Load)
        base = self._kind(node.value, scope, True) if quiet else self._expr(
            node.value, scope, module_ok=True, class_ok=True, annotation=annotation)
        refuse = (lambda text: None) if quiet else (lambda text: self.refuse(node, text))
        if base.tag == "unbound":
            return UNBOUND  # (a NameError when it runs, before anything else)
        own = base.tag in ("own", "func", "class")
        if attr.startswith("__") and attr.endswith("__"):
            return self._dunder_attribute(node, base, loads, call, scope, refuse)
        if attr.startswith("_"):
            return self._private_attribute(node, own, refuse)
        if not loads:
            return self._attribute_set(node, base, own, refuse)
        if base.module:
            return self._module_attribute(node, base, refuse)
        if base.tag == "class":
            return self._class_attribute(node, base, call, scope, refuse)
        if own:
            return self._own_read(node, refuse)
        return self._value_attribute(node, base, quiet, refuse)

    def _dunder_attribute(self, node: ast.Attribute, base: Kind, loads: bool, call, scope: Scope, refuse) -> Kind:
        attr = node.attr
        if attr in DUNDER_READ and loads:
            return VALUE
        if attr == "__init__" and loads and base.tag == "own":
            if isinstance(node.value, ast.Call) and self._kind(node.value.func, scope, True).obj is super:
                return VALUE  # (super().__init__(...): the base's __init__ on this object, in its own __init__)
            refuse(f"`{self.text(node)}`: an object's __init__ may be called only as super().__init__(...) (called "
                   "again with other arguments, it would run your class's code on what it is given); make a new "
                   "object instead.")
            return VALUE
        if attr == "__init__" and loads and (base.tag == "class" or base.tag == "static" and base_class(
                base.obj)):  # (a library class's __init__ sets only the names its instances hold: LIBRARY_HELD)
            return self._class_init(node, call, scope, refuse)
        refuse(f"`{self.text(node)}` uses one of Python's own names (`{attr}`), which reach the machinery of "
               f"Python or torch; {YOURSELF}.")
        return VALUE

    def _private_attribute(self, node: ast.Attribute, own: bool, refuse) -> Kind:
        attr = node.attr
        if own and attr in self.private_names() and attr not in admitted.OWN_PRIVATE_REFUSED:
            return self._own_attribute(attr)
        refuse(f"`{self.text(node)}` uses a private name (starting with _): on a library object it reaches "
               "the machinery of Python or torch (their kernels included), and the grader can tell it is "
               "yours only on your own objects (self, or a name bound to YourClass(...)) where your code "
               "sets it; use public NumPy/torch functions.")
        return VALUE

    def _attribute_set(self, node: ast.Attribute, base: Kind, own: bool, refuse) -> Kind:
        attr = node.attr
        if own or (base.tag == "value" and attr in STORED):
            return VALUE
        if base.tag == "static":
            refuse(f"`{self.text(node)}`: the libraries' objects may not be changed; use your own variables "
                   "and attributes.")
        else:
            refuse(f"`{self.text(node)}`: only your own objects' attributes may be set (self.{attr} in a "
                   f"method of your class, or on a name bound to YourClass(...)), and arrays' "
                   f"{', '.join(sorted(STORED))}; the grader cannot tell that this object is yours.")
        return VALUE

    def _value_attribute(self, node: ast.Attribute, base: Kind, quiet: bool, refuse) -> Kind:
        attr = node.attr
        if attr in VALUE_ATTRIBUTES or base.tag in ("record", "records") and attr in base.obj:
            return VALUE  # (a namedtuple's field: an item of the tuple, whatever was given for it)
        why = family("values", attr)
        if why:
            refuse(f"`{self.text(node)}`: `.{attr}` {why}.")
        elif not quiet:
            yours = self._own_name(attr)
            refuse(f"`{self.text(node)}`: `.{attr}` is not an attribute of the values the exercises use "
                   "(tensors, arrays, numbers, strings, containers, layers, mha's weights)"
                   + (", and the grader cannot tell that this object is one of yours (it can for self in a "
                      "method of your class, for a name bound to YourClass(...), and for a parameter that every "
                      "call of its function passes such an object); read the attribute where that holds, or "
                      "pass the value itself" if yours else "; use the maths of tensors and arrays")
                   + ".")
        return VALUE

    def _match_class(self, node: ast.MatchClass, scope: Scope) -> None:
        kind = self._expr(node.cls, scope, classinfo=True)
        cls = kind.obj if kind.tag == "static" else None
        if node.patterns and not (kind.tag == "class" or cls in SELF_MATCH or (
                isinstance(cls, type) and set(getattr(cls, "__match_args__", ("_",))) <= VALUE_ATTRIBUTES)):
            self.refuse(node, f"positional patterns of `{self.text(node.cls)}` read attributes the exercises do "
                              "not admit; write `case Class(attribute=name)`.")
        for attr in node.kwd_attrs:
            if kind.tag == "class" and self._own_attribute(attr, on_class=True).tag in ("class", "conflict"):
                self.refuse(node, f"`case ...({attr}=...)` would bind the class `.{attr}` holds as a value, whose "
                                  "methods could then be called on any object; read it as Class.attribute.")
                continue
            ok = (kind.tag == "class" and not attr.startswith("_") and attr not in admitted.OWN_REFUSED) or (
                attr in VALUE_ATTRIBUTES) or (kind.tag == "records" and attr in kind.obj)
            if not ok:
                self.refuse(node, f"`case ...({attr}=...)` reads `.{attr}`, which is not admitted on a value.")
        for p in node.patterns + node.kwd_patterns:
            self._part(p, scope)
