"""Imports and modules: which modules a graded function may import, and how a module may be used.

* An import names an admitted module (``library.MODULES``), or admitted members of one (``from torch.nn
  import functional as F``); the name it binds is then that real object wherever it is read
  (:meth:`Imports._import_kind`). ``from __future__ import annotations`` is compile-time only.
* The course's own packages (:data:`COURSE`) hold the ready-made answers: never imported.
* ``from M import *`` is refused even for an admitted module: the names used are imported by name.
* A module is only ever the base of an attribute (``np.einsum``): it is never stored, passed, returned
  or matched (:meth:`~.syntax.Syntax._expr`), so no value holds a module; its attributes are its
  admitted members only (:meth:`Imports._module_attribute`), and a name left out is refused with its
  family's reason, quoted from ``admitted.FAMILIES``.
* A module-level ``import`` may not bind a dunder or hide a refused builtin (:mod:`.names`).

A new exercise's ready-made answers (torch's own decoder layer, grouped-query attention) are excluded
where every other ready-made attention is: the "ready-made attention" family of
``scripts/admitted_names.py`` (regenerate ``admitted.py``), and the walk's forbidden objects
(``walk.py``, ``READY_MADE``).
"""
import ast

from .kinds import VALUE, Kind
from .library import MODULES, imported, member
from .scopes import Binding, Scope
from .words import YOURSELF

FUTURE = {"annotations"}  # `from __future__ import annotations` (compile-time only)
COURSE = {"mha_lib", "mha_checks", "mha_grader", "mha_book"}


class Imports:
    """The rule's methods for ``import`` statements, what they bind, and attributes of modules."""

    def _import(self, node, scope: Scope) -> None:
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if module == "__future__" and all(a.name in FUTURE for a in node.names):
                return None
            fulls = [module]
        else:
            module, fulls = None, [a.name for a in node.names]
        for full in fulls:
            if full.split(".")[0] in COURSE:
                return self.refuse(node, f"importing {full} is not admitted: the course's own code holds the "
                                         f"ready-made answers, and a ready-made answer earns no credit; {YOURSELF}.")
            if full not in MODULES:
                return self.refuse(node, f"`{self.text(node)}` is not admitted: a graded function may use only "
                                         f"{', '.join(sorted(m for m in MODULES if MODULES[m] != frozenset()))} "
                                         "(code outside the graded functions, such as plots or timing, is "
                                         "neither run nor judged).")
        for a in node.names:
            if a.name == "*":
                return self.refuse(node, f"`from {module} import *` is not admitted: import the names you use "
                                         f"(from {module} import name).")
            if isinstance(node, ast.ImportFrom):
                ok, why = member(module, a.name)
                if not ok:
                    return self.refuse(node, not_listed(f"{module}.{a.name}", module, why))
            name = a.asname or (a.name if isinstance(node, ast.ImportFrom) else a.name.split(".")[0])
            self._binding_name(node, name, self._bound_where(scope, name))

    def _import_kind(self, b: Binding) -> Kind:
        """What a name bound by an import is: the admitted module or member itself, else a value (the
        import statement is refused where it is judged)."""
        module, attr = b.value
        if module.startswith(".") or module.split(".")[0] in COURSE:
            return VALUE
        if attr is None:
            return Kind("static", imported(module), b.name) if module in MODULES else VALUE
        if module not in MODULES:
            return VALUE
        ok, obj = member(module, attr)
        return Kind("static", obj, b.name) if ok else VALUE

    def _module_attribute(self, node: ast.Attribute, base: Kind, refuse) -> Kind:
        """``module.name``: the admitted member itself, resolved statically."""
        ok, obj = member(base.obj.__name__, node.attr)
        if not ok:
            refuse(not_listed(self.text(node), base.obj.__name__, obj))
            return VALUE
        return Kind("static", obj, self.text(node))


def not_listed(text: str, module: str, why: str | None) -> str:
    if why:
        return f"`{text}` {why}; {YOURSELF}."
    names = MODULES.get(module)
    sample = "every public name" if names is None else ", ".join(sorted(names)[:8]) + ", ..."
    return (f"`{text}` is not a name the exercises admit in {module} (it admits the maths: {sample}; the "
            f"full list is in mha_checks/admission/admitted.py); {YOURSELF}.")
