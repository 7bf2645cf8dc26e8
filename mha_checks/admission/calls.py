"""Calls: what a call returns, as far as the rule needs to know, and the arguments some callees take.

A call is admitted when what is called is: an admitted library function or class (its name resolved
statically: :mod:`.library`), a notebook function or class, or a value's admitted method. What comes
back is a value, except where the rule knows better:

* a notebook class called makes the student's own object, and so does a notebook function whose every
  return is one (:meth:`.own.OwnObjects.returns`);
* ``super()`` (or ``super(Class, self)``, with the student's own object) is the student's own object;
* ``collections.namedtuple("Pair", "first second")`` with its fields written out makes a class whose
  instances' fields are items of the tuple, readable by name (:func:`namedtuple_fields`).

Some arguments are read for what they name, not as values: the classes of ``isinstance`` and
``issubclass`` (a notebook class, or an isinstance-only name like ``np.ndarray``), the module of
``hasattr``, and the class of ``super``. Every other argument is a value like any other.
"""
import ast
import collections
import functools

from .kinds import OWN, UNBOUND, VALUE, Kind, join
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
            result = functools.reduce(join, [self.returns(d) for d in func.obj])
        elif func.tag == "records":
            result = Kind("record", func.obj)
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
