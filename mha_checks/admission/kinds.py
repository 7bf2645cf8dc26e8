"""What the analysis knows of an expression: its :class:`Kind`.

Every expression the rule reads gets a kind, and every refusal rests on one. Only what is *known* is
trusted: ``static`` (an admitted library object, resolved here: a module, a function, a class), ``own``
(the student's own object: :mod:`.own`), ``class`` and ``func`` (the notebook's own classes and
functions), ``records``/``record`` (a ``collections.namedtuple`` class with its fields written out, and
its instance), ``own-items`` (a generator, list or tuple whose every item is the student's own object),
``field`` (a dataclass ``Field``: :mod:`.calls`). Anything else is a ``value``: admitted only through ``admitted.VALUE_ATTRIBUTES``.
Where a name may be either of two kinds (bound twice, or read before a binding runs), :func:`join` keeps
what holds for both, and ``conflict`` where a module, an isinstance-only name or a notebook class would
be confused with anything else (:meth:`.syntax.Syntax._expr` refuses it).
"""
import types
from dataclasses import dataclass

from .library import not_called


@dataclass(frozen=True)
class Kind:
    tag: str                 # static | own | own-items | class | func | records | record | field | value |
    #                          conflict | builtin-refused
    obj: object = None       # static: the object; class: frozenset of ClassDef nodes; records (a class made by
    #                          collections.namedtuple) and record (its instance): frozenset of its field names
    text: str = ""

    @property
    def module(self) -> bool:
        return self.tag == "static" and isinstance(self.obj, types.ModuleType)

    @property
    def not_called(self) -> bool:
        return self.tag == "static" and not_called(self.obj)


VALUE = Kind("value")
UNBOUND = Kind("unbound")  # a name bound nowhere: reading it raises NameError before anything else happens
OWN = Kind("own")
OWN_ITEMS = Kind("own-items")  # an iterable whose every item is the student's own object (:mod:`.own`)
FIELD = Kind("field")


def join(a: Kind, b: Kind) -> Kind:
    """What a name is when it may be either (a builtin the exercises refuse stays refused)."""
    if a == b or (a.tag == "static" and b.tag == "static" and a.obj is b.obj):
        return a
    if "builtin-refused" in (a.tag, b.tag):
        return a if a.tag == "builtin-refused" else b
    if "field" in (a.tag, b.tag):  # (a dataclass Field, whichever: never a value)
        return FIELD
    if "unbound" in (a.tag, b.tag):
        return b if a.tag == "unbound" else a
    if "conflict" in (a.tag, b.tag) or a.module or b.module or a.not_called or b.not_called:
        return Kind("conflict", text=a.text or b.text)
    if a.tag == b.tag and a.tag in ("class", "func"):
        return Kind(a.tag, a.obj | b.obj)
    if "class" in (a.tag, b.tag):
        return Kind("conflict", text=a.text or b.text)
    return VALUE
