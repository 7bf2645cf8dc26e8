"""The ready-made rule: which code a graded function may reach, and therefore which code runs.

Theory of operation
===================

A student earns points by computing attention; a ready-made answer (torch's own attention under any of
its names, the module handed to exercise 5, the course's own answers) earns nothing. This package
decides that, in the trusted process, from the source alone, before anything runs: nothing the
student's process later does, or claims, takes part in the verdict.

Only what a graded function reaches runs and is judged; what it reaches is admitted only when it is
shown harmless, in a closed world: every construct, name and attribute is refused unless a list admits
it. Each rule stands in the module named by the question it answers, with its reasons beside it:

=====================================================  ===============================================
what runs, and which tests a refusal costs             :mod:`.verdict`
which syntax (and where each construct's rule is)      :mod:`.syntax`
which names, bindings and builtins; Python's scoping   :mod:`.names`, :mod:`.scopes`
which modules, and which of their members              :mod:`.imports`, :mod:`.library`
which values, and which of their attributes            :mod:`.values`
which calls, and what they return                      :mod:`.calls`
what counts as the student's own object                :mod:`.own`; its classes: :mod:`.classes`
the refusal's words                                    :mod:`.words`
the lists themselves (generated, never edited)         :mod:`.admitted`, by ``scripts/admitted_names.py``
the proof that the world is closed                     :mod:`.walk`
how the parts make one rule                            :mod:`.rule`, with :mod:`.kinds`
=====================================================  ===============================================

**Why the world is closed.** Every object a graded function can hold is an admitted module member, a
value made by an admitted call or by Python from literals, or the student's own object; each step from
one to the next is an admitted attribute, an item, or a call. :mod:`.walk` proves it on the pinned
libraries (``tests/test_admission_closure.py`` runs it in CI): it walks that graph from every admitted
member and from sample values of every type the walk's own calls return, following every admitted
name, and fails with the path if a module, a function's globals, code, a frame,
``eval``/``exec``/``compile``/``__import__``/``open``/``getattr``, or a ready-made attention is
reachable. Memory-unsafe functions (NumPy's ``as_strided``, ``frombuffer``, ``ndarray(buffer=...)``,
``ctypes``, ``id``) are out; torch's ``as_strided`` checks its bounds and stays.

**Where a change goes.** A new exercise's ready-made answers (torch's own decoder layer, grouped-query
attention): the "ready-made attention" family of ``scripts/admitted_names.py`` (then regenerate
:mod:`.admitted`) and what the walk counts as ready-made (``walk.READY_MADE``). A new library name or
value attribute: the generator's lists, never this package. New objects for the walk to start from (the
objects a notebook defines): ``walk.roots``. A new construct or a new way to be the student's own
object: its module above, with its refusal's sentence beside it.

What was taken from RestrictedPython and Odoo's ``safe_eval``, and what was not. From both: an
allowlist of syntax (RestrictedPython's transformer refuses every node it does not know; Odoo admits
only listed opcodes), names that begin with an underscore refused as attributes and never bound as
dunders (RestrictedPython's ``check_name``; Odoo refuses any name containing ``__``), and a builtins
table of its own. From Odoo's ``wrap_module``: a module is exposed only through the attributes it
lists. Not taken: their run-time guards (``_getattr_``, a restricted ``__builtins__``), because a
check inside the student's process can be patched by that process, so here everything is decided
before it runs; and their treatment of public attributes, which both admit by default (Odoo with a
short blocklist of ``func_globals``, ``gi_frame``, ``f_globals``...): exactly the open world the
issue found leaking module dictionaries, replaced here by the generated closed lists and the walk.
"""
from .library import MODULES
from .names import BUILTINS
from .values import VALUE_ATTRIBUTES
from .verdict import Verdict, admit, refusals, visible_refusals
from .words import MOST, Refusal, explain

__all__ = ["Refusal", "Verdict", "admit", "refusals", "visible_refusals", "explain", "MODULES", "BUILTINS",
           "VALUE_ATTRIBUTES", "MOST"]
