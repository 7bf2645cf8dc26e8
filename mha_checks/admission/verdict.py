"""The verdict on a notebook: what runs, and which tests are refused (:func:`admit`, and the views of it the
visible tests and the course's own tests take: :func:`visible_refusals`, :func:`refusals`).

**What runs.** A notebook is a sequence of top-level statements sharing one namespace. A graded
function reaches the statements that bind it, then those that bind the module-level names these read,
and so on (:meth:`.scopes.Program.reach`, with Python's own scoping). Only reached statements are judged
and run, in the notebook's order, with their lines where they were (:func:`_selected`); the rest (plots,
timing, prints, the try-it comparison with torch's own module) is neither run nor judged. A star import
of a module the exercises do not admit (a free cell's ``from pylab import *``) is taken to bind no
builtin's name: a graded function that reads ``len`` reads the builtin, as it runs here
(:func:`_wildcard_binds`). A refused statement costs only the tests whose functions reach it; its
message says what was refused, why, what reached it, and what to write instead (:mod:`.words`). The
release's read-only cells always run and are not judged (they are the course's). Code that does not
parse is not judged (the sandbox reports its syntax error); code too deep to parse or check refuses
every test. The visible tests apply the same function to the cells the kernel ran
(:func:`visible_refusals`), so ``nbgrader validate`` shows the grader's verdict.
"""
import ast
import builtins
import contextlib
import functools
import gc
import re
from dataclasses import dataclass, field

from .library import MODULES
from .rule import Rule
from .scopes import Program
from .words import MOST, TOO_DEEP, Refusal, lines


@dataclass
class Verdict:
    """What runs (``cells``: the trusted cells whole, then each cell's reached statements, lines kept)
    and, per test, what refuses it (a test absent from ``refused`` is admitted)."""
    cells: list = field(default_factory=list)
    refused: dict = field(default_factory=dict)  # test id -> [Refusal]


@contextlib.contextmanager
def _no_gc():
    """The analysis makes many small objects and no garbage worth collecting: a cyclic collection in the
    middle (it scans the whole heap, torch's objects included) only costs time, more for larger cells."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def admit(cells: list[dict], tests: dict[str, set], trusted: int = 0) -> Verdict:
    """The verdict on a notebook: ``cells`` ({"label", "source"}, in order; the first ``trusted`` are
    the release's own), ``tests`` {test id: the functions it calls}."""
    with _no_gc():
        return _admit(cells, tests, trusted)


def _admit(cells: list[dict], tests: dict[str, set], trusted: int) -> Verdict:
    parsed = [_parse(c["source"]) for c in cells]
    deep = [Refusal(c["label"], 1, TOO_DEEP) for c, t in zip(cells, parsed) if t is _TOO_DEEP]
    if deep:
        return Verdict([], {t: deep for t in tests})
    trees = [t if t is not None else ast.Module([], []) for t in parsed]
    try:
        program = Program(trees)
        rule = Rule(program, cells, set().union(*tests.values()) if tests else set())
        roots = {i for i, (c, _) in enumerate(program.statements) if c < trusted}
        binds = functools.partial(_wildcard_binds, program)
        by_functions = {fns: program.reach(set(fns), roots, binds) for fns in {frozenset(f) for f in tests.values()}}
        reaches = {t: by_functions[frozenset(fns)] for t, fns in tests.items()}
        every = set().union(*reaches.values()) if reaches else set()
        found = rule.judge(sorted(every - roots))
    except RecursionError:
        return Verdict([], {t: [Refusal(cells[-1]["label"] if cells else "", 1, TOO_DEEP)] for t in tests})
    verdict = Verdict()
    run: set[int] = set(roots)
    for test, reach in reaches.items():
        bad = [i for i in sorted(reach) if i in found]
        if bad:
            verdict.refused[test] = [r.with_path(_path(program, reach, i, tests[test])) for i in bad
                                     for r in found[i]][:MOST]
        else:
            run |= set(reach)
    verdict.cells = _selected(cells, parsed, program, run, trusted, set().union(*tests.values()) if tests else set())
    return verdict


def refusals(cells: list[dict], functions=None) -> list[Refusal]:
    """Every refusal in a program judged whole (every statement as if reached), or, with ``functions``,
    in what those functions reach."""
    if functions is not None:
        return admit(cells, {"": set(functions)}).refused.get("", [])
    parsed = [_parse(c["source"]) for c in cells]
    deep = [Refusal(c["label"], 1, TOO_DEEP) for c, t in zip(cells, parsed) if t is _TOO_DEEP]
    if deep:
        return deep
    try:
        program = Program([t if t is not None else ast.Module([], []) for t in parsed])
        found = Rule(program, cells, set()).judge(range(len(program.statements)))
    except RecursionError:
        return [Refusal(cells[-1]["label"] if cells else "", 1, TOO_DEEP)]
    return [r.refusal for i in sorted(found) for r in found[i]][:MOST]


def visible_refusals(function: str, namespace: dict, fallback_source: str = "") -> list[Refusal]:
    """The visible tests' view: what the grader would refuse in what ``function`` reaches, read from the
    cells this kernel ran (IPython's ``In``), or, without them, from ``fallback_source`` alone with the
    names it does not bind found in ``namespace``."""
    history = namespace.get("In")
    if isinstance(history, list) and any(isinstance(s, str) and s.strip() for s in history):
        cells = [{"label": f"cell [{i}]", "source": s} for i, s in enumerate(history) if isinstance(s, str) and s]
        return admit(cells, {"": {function}}).refused.get("", [])
    cells = [{"label": function, "source": fallback_source}]
    parsed = _parse(fallback_source)
    if parsed is _TOO_DEEP:
        return [Refusal(function, 1, TOO_DEEP)]
    if parsed is None:
        return []
    program = Program([parsed])
    reach = program.reach({function}, binds=functools.partial(_wildcard_binds, program))
    found = Rule(program, cells, {function}, namespace).judge(sorted(reach))
    return [r.refusal for i in sorted(found) for r in found[i]][:MOST]


# --- parsing and the selected source -----------------------------------------------------------------

_TOO_DEEP = object()


def _parse(source: str):
    """The tree; None for code that compiles nowhere (a syntax error: the sandbox reports it); _TOO_DEEP
    for code too deep to parse here."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        return _TOO_DEEP


def _wildcard_binds(program: Program, statement: int, name: str) -> bool:
    """May the wildcard ``statement`` bind ``name``, which no other statement binds? Any name, but that a
    star import of a module the exercises do not admit (a free cell's ``from pylab import *``) is taken to
    leave the builtins as they are: it is neither run nor judged, so a graded function that reads ``len``
    reads the builtin, as the grader runs it. (A star import of an admitted module is reached: it is refused,
    and its message says to import the names used.)"""
    module = program.star_modules.get(statement)
    return module is None or module in MODULES or name not in vars(builtins)


def _selected(cells, parsed, program: Program, run: set[int], trusted: int, graded: set) -> list[dict]:
    """The cells to run: trusted cells whole; of the others, the statements in ``run`` at their own lines.
    A cell that does not parse runs whole when it looks like it defines a graded function: it runs
    nothing (it does not compile) and the grader reports its syntax error where the student wrote it."""
    by_cell: dict[int, list] = {}
    for i, (cell, statement) in enumerate(program.statements):
        if i in run:
            by_cell.setdefault(cell, []).append(statement)
    defines = re.compile(r"\bdef\s+(" + "|".join(re.escape(g) for g in sorted(graded)) + r")\b") if graded else None
    out = []
    for k, cell in enumerate(cells):
        if k < trusted or (parsed[k] is None and defines is not None and defines.search(cell["source"])):
            out.append({"label": cell["label"], "source": cell["source"]})
        elif k in by_cell:
            out.append({"label": cell["label"], "source": _keep(cell["source"], by_cell[k])})
    return out


def _keep(source: str, statements: list) -> str:
    """``source`` with only ``statements`` left, each on its own lines (one pass over the lines)."""
    source_lines = lines(source)
    out = [""] * len(source_lines)
    for st in statements:
        decorated = getattr(st, "decorator_list", None)
        first, last = (decorated[0].lineno - 1 if decorated else st.lineno - 1), st.end_lineno - 1
        col = 0 if decorated else st.col_offset
        head = source_lines[first].encode()
        if first == last:
            piece = [head[col:st.end_col_offset].decode()]
        else:
            piece = [head[col:].decode()] + source_lines[first + 1:last] + [
                source_lines[last].encode()[:st.end_col_offset].decode()]
        out[first] = f"{out[first]}; {piece[0]}" if out[first] else piece[0]
        out[first + 1:last + 1] = piece[1:]
    text = "\n".join(out)
    return text if text.endswith("\n") else text + "\n"


def _path(program: Program, reach: dict, i: int, functions: set) -> str:
    """How the graded function reaches statement i: "multi_head_attention → helper"."""
    names = []
    while i is not None and len(names) < 6:
        name, via = reach.get(i, ("", None))
        if name:
            names.append(name)
        i = via
    names.reverse()
    return " → ".join(names) if len(names) > 1 else ""
