"""Calls: what a call returns, as far as the rule needs to know, and the arguments some callees take.

A call is admitted when what is called is: an admitted library function or class (its name resolved
statically: :mod:`.library`), a notebook function or class, or a value's admitted method. What comes
back is a value, except where the rule knows better:

* a notebook class called makes the student's own object, and so does a notebook function whose every
  return is one (:meth:`.own.OwnObjects.returns`); a notebook generator whose every ``yield`` gives one
  makes the student's own items (:meth:`.own.OwnObjects.yields`), and so do ``list``, ``tuple``,
  ``sorted``, ``reversed``, ``iter`` of them, whose ``next`` is one;
* ``super()`` (or ``super(Class, self)``, with the student's own object) is the student's own object;
* ``collections.namedtuple("Pair", "first second")`` with its fields written out makes a class whose
  instances' fields are items of the tuple, readable by name (:func:`namedtuple_fields`);
* ``dataclasses.field(...)`` makes a dataclass's ``Field``, which the decorator fills with the annotation's
  object (a notebook class, ``np.ndarray``): it is written only as the default of an annotated name in a
  ``@dataclass`` body (:meth:`.names.Names._assign`), and ``dataclasses.field`` itself is only called, so no
  ``Field`` is ever a value (``field.type`` would hand out the class).

Some arguments are read for what they name, not as values: the classes of ``isinstance`` and
``issubclass`` (a notebook class, or an isinstance-only name like ``np.ndarray``), the module of
``hasattr``, and the class of ``super``. Every other argument is a value like any other.
"""
import ast
import collections
import dataclasses
import functools

from . import admitted
from .kinds import FIELD, OWN, OWN_ITEMS, UNBOUND, VALUE, Kind, join
from .own import KEEP_ITEMS
from .scopes import Scope


class Calls:
    """The rule's method for calls."""

    def _call(self, node: ast.Call, scope: Scope, quiet: bool) -> Kind:
        if quiet:
            func = self._kind(node.func, scope, True, call=node)
        else:
            func = self._expr(node.func, scope, class_ok=True, call=node)
        result = VALUE
        if func.tag == "unbound":
            result = UNBOUND
        elif func.tag == "class":
            result = OWN
        elif func.tag == "func":
            result = functools.reduce(join, [self.yields(d) if _generator(d) else self.returns(d) for d in func.obj])
        elif func.tag == "static" and any(func.obj is f for f in KEEP_ITEMS) and len(node.args) == 1 and \
                self._kind(node.args[0], scope, True).tag == "own-items":
            result = OWN_ITEMS  # (list(...), tuple(...), sorted(...) of the student's own items)
        elif func.tag == "static" and func.obj is next and len(node.args) == 1 and \
                self._kind(node.args[0], scope, True).tag == "own-items":
            result = OWN
        elif func.tag == "value" and isinstance(node.func, ast.Attribute):
            result = self._method_result(node.func, scope)
        elif func.tag == "records":
            result = Kind("record", func.obj)
        elif func.tag == "static" and func.obj is dataclasses.field:
            result = FIELD
        elif func.tag == "static" and func.obj is collections.namedtuple:
            fields = namedtuple_fields(node)
            result = Kind("records", fields) if fields is not None else VALUE
        elif func.tag == "static" and func.obj is super:
            result = OWN
            if not quiet and len(node.args) not in (0, 2):
                self.refuse(node, "write super() or super(Class, self).")
            if not quiet and len(node.args) == 2:
                self._expr(node.args[0], scope, class_ok=True)
                if self._kind(node.args[1], scope, True).tag != "own":
                    self.refuse(node, "super(Class, obj) is admitted only with obj your own object (self).")
                self._expr(node.args[1], scope)
                return result
        if quiet:
            return result
        classinfo = func.tag == "static" and func.obj in (isinstance, issubclass)
        module_ok = func.tag == "static" and func.obj is hasattr
        for i, a in enumerate(node.args):
            self._expr(a, scope, classinfo=classinfo and i == 1, module_ok=module_ok and i == 0,
                       class_ok=(classinfo and i == 1) or (func.tag == "static" and func.obj is super))
        for k in node.keywords:
            self._expr(k.value, scope)
        return result


    def _method_result(self, func: ast.Attribute, scope: Scope) -> Kind:
        """``obj.name(...)`` on the student's own object, where ``name`` is only ever a method of the notebook's
        (no library base holds it, no code stores it): what every notebook function of that name gives."""
        name = func.attr
        if name.startswith("_") or name in admitted.LIBRARY_HELD or self.library_sets(name) or \
                self._kind(func.value, scope, True).tag != "own":
            return VALUE
        classes = [s for s in self.p.scopes if s.kind == "class"]
        if any(b.how != "def" for s in classes for b in s.bindings.get(name, [])) or any(
                t.attr == name for t, _, _ in self.p.attribute_stores):
            return VALUE  # (something else than a method may be there)
        defs = [st for s in classes for st in s.node.body if isinstance(st, ast.FunctionDef) and st.name == name]
        if any(d.decorator_list for d in defs):
            return VALUE  # (a decorator may keep what a call made, for the next call to hand out again)
        return functools.reduce(join, [self.yields(d) if _generator(d) else self.returns(d) for d in defs]) \
            if defs else VALUE


def _generator(node) -> bool:
    """Is the notebook function ``node`` a generator (a ``yield`` of its own, not of a function inside it)?"""
    todo = list(node.body) if isinstance(node, ast.FunctionDef) else []
    while todo:
        st = todo.pop()
        if isinstance(st, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(st, ast.FunctionDef | ast.ClassDef | ast.Lambda | ast.AsyncFunctionDef):
            todo += ast.iter_child_nodes(st)
    return False


def namedtuple_fields(call: ast.Call) -> frozenset | None:
    """The field names of ``collections.namedtuple("Name", "a b")`` (a string, or a list or tuple of strings,
    written out), else None."""
    given = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "field_names"),
                                                          None)
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return frozenset(given.value.replace(",", " ").split())
    if isinstance(given, ast.List | ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in given.elts):
        return frozenset(e.value for e in given.elts)
    return None
