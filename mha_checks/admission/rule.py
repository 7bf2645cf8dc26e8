"""The rule: one object that judges the reached statements of one program, composed of one part per question.

Each part is a class of methods in the module that answers its question (which syntax, which names,
imports, values and attributes, calls, classes, the student's own objects); :class:`Rule` joins them and
holds what they share: the program (``p``: :class:`.scopes.Program`), the cells (for the source a refusal
quotes), the graded functions, the kernel's namespace (the visible tests only), the refusals found per
statement, and the memos of what each name and binding is. The parts call one another through ``self``
(a name's kind needs a call's result, which needs what a notebook function returns...), and every
expression is read in one of two modes: judged (``_expr``: refusals recorded, at the statement being
judged) or quiet (:meth:`Rule.quiet_kind`: what an expression is, for a binding read elsewhere, with no
refusal recorded).
"""
import ast

from .calls import Calls
from .classes import Classes
from .imports import Imports
from .kinds import Kind
from .names import Names
from .own import OwnObjects
from .scopes import Program, Scope
from .syntax import Syntax
from .values import Values
from .words import MOST, Found, Refusal, lines


class Rule(Syntax, Names, Imports, Values, Calls, Classes, OwnObjects):
    def __init__(self, program: Program, cells: list, graded: set, namespace: dict | None = None):
        self.p, self.cells, self.graded, self.namespace = program, cells, set(graded), namespace
        self.found: dict[int, list] = {}
        self.stmt = -1
        self.memo: dict[int, Kind] = {}
        self.names: dict[tuple, Kind] = {}
        self.busy: set[int] = set()
        self._lines = [None] * len(cells)
        self._methods = None
        self._own_attrs = None
        self._any_name = None  # (library_sets)
        self._fields = frozenset()
        self._sites = None
        self._parents = None

    def judge(self, statements) -> dict[int, list]:
        """{statement: [Found]} of the top-level ``statements`` (indices into the program) judged."""
        for i in statements:
            cell, statement = self.p.statements[i]
            self.stmt, self.cell = i, cell
            self._stmt(statement, self.p.module)
        return self.found

    def refuse(self, node, text: str) -> None:
        if self.stmt < 0:
            return
        found = self.found.setdefault(self.stmt, [])
        if len(found) < MOST:
            line = getattr(node, "lineno", 1)
            found.append(Found(Refusal(self.cells[self.cell]["label"], line, text)))

    def text(self, node) -> str:
        """The source of ``node`` (one line, at most 80 characters)."""
        cell_lines = self._lines[self.cell]
        if cell_lines is None:
            cell_lines = self._lines[self.cell] = lines(self.cells[self.cell]["source"])
        try:
            if node.lineno == node.end_lineno:
                return cell_lines[node.lineno - 1].encode()[node.col_offset:node.end_col_offset].decode()[:80]
        except (AttributeError, IndexError, UnicodeDecodeError):
            pass
        return ast.unparse(node)[:80]

    def quiet_kind(self, node, scope: Scope) -> Kind:
        """What ``node`` is, with no refusal recorded (used while binding)."""
        saved = self.stmt
        self.stmt = -1
        try:
            return self._kind(node, scope, quiet=True)
        finally:
            self.stmt = saved
