"""The pinned libraries as the rule sees them: each admitted module imported here, in the trusted process,
and each admitted name resolved to the real object it names.

The lists are generated (``admitted.MODULES``, by ``scripts/admitted_names.py`` from the pinned torch and
NumPy, each excluded family named there with its reason), so nothing is admitted because it is on no
list. Resolving a name to its object is what makes an alias or a re-export the object it names
(``xp = np``, ``from torch.nn import functional as F``): the rule compares objects, never spellings. A
module is never a member (a submodule is admitted by an entry of its own), and a name admitted for
``isinstance`` only (``admitted.NOT_CALLED``: ``np.ndarray``, whose constructor builds arrays over raw
buffers) is known here by its identity.
"""
import functools
import importlib
import sys
import threading
import types

from . import admitted
from .words import family

MODULES = admitted.MODULES

_IMPORTING = threading.Lock()


@functools.cache
def imported(name: str):
    """An admitted module, imported here (one thread at a time: two threads importing torch for the first
    time at once see it half initialised)."""
    with _IMPORTING:
        return importlib.import_module(name)


def member(module_name: str, attr: str):
    """``module.attr`` if the module admits that name: (True, object), else (False, why or None)."""
    sub = f"{module_name}.{attr}"
    if sub in MODULES:
        return True, imported(sub)
    names = MODULES[module_name]
    if attr.startswith("_") or (names is not None and attr not in names):
        return False, family(module_name, attr)
    obj = getattr(imported(module_name), attr, _MISSING)
    if obj is _MISSING or isinstance(obj, types.ModuleType):
        return False, None
    return True, obj


_MISSING = object()


@functools.cache
def _not_called_ids() -> frozenset:
    return frozenset(id(getattr(imported(m), n)) for m, names in admitted.NOT_CALLED.items() for n in names)


def not_called(obj) -> bool:
    """Is ``obj`` admitted for ``isinstance`` and annotations only (never called or passed)?"""
    return isinstance(obj, type) and id(obj) in _not_called_ids() if obj is not None else False


@functools.lru_cache(maxsize=None)
def _admitted_in(module_name: str) -> dict[int, object]:
    """id -> object of the module and of every object it admits."""
    module = imported(module_name)
    names = MODULES[module_name]
    out = {id(module): module}
    for attr in (names if names is not None else [n for n in dir(module) if not n.startswith("_")]):
        ok, obj = member(module_name, attr)
        if ok:
            out[id(obj)] = obj
    return out


def is_admitted(obj) -> bool:
    """Is ``obj`` an admitted module or member? (Only modules already imported are searched.)"""
    return any(id(obj) in _admitted_in(name) for name in MODULES if name in sys.modules)
