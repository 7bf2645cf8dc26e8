"""Which syntax: the constructs a graded function may use, and the walk that hands each to its rule.

:data:`SYNTAX` lists every admitted construct: definitions, assignments, loops, comprehensions, ``try``,
``with``, ``match``, ``assert``, ``raise``, lambdas, f-strings. Anything else (``async``/``await``, and
anything Python adds later) is refused until admitted here: the list is of what is admitted, never of
what was seen to be harmful (as RestrictedPython's transformer refuses every node it does not know).

A construct with a rule of its own is handed to the method that applies it; every other construct is
judged by its parts. Where to look for the rule of each:

=============================================  =====================================================
``import``, ``from ... import``, ``module.x``  :mod:`.imports`
``class``, ``Class.x``, ``Class.__init__``     :mod:`.classes`
a name read or bound, ``global``, ``nonlocal``,  :mod:`.names` (Python's scoping: :mod:`.scopes`)
``x = module`` (an alias)
``x.name``, ``x.name = ...``, ``case C(...)``  :mod:`.values` (on the student's own object: :mod:`.own`)
a call, ``super()``, ``namedtuple(...)``       :mod:`.calls`
``def``, ``lambda``, comprehensions, ``:=``,   here
``except ... as``, ``case ... as``, what a
module, a class or a refused builtin may be
used as (:meth:`Syntax._expr`)
=============================================  =====================================================
"""
import ast
import dataclasses

from . import admitted
from .kinds import OWN, OWN_ITEMS, VALUE, Kind
from .names import ADVICE
from .scopes import COMPREHENSIONS, Scope
from .words import YOURSELF

SYNTAX = (ast.Module, ast.FunctionDef, ast.ClassDef, ast.Return, ast.Delete, ast.Assign, ast.AugAssign,
          ast.AnnAssign, ast.For, ast.While, ast.If, ast.With, ast.Match, ast.Raise, ast.Try, ast.TryStar,
          ast.Assert, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Expr, ast.Pass, ast.Break,
          ast.Continue, ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set,
          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Yield, ast.YieldFrom, ast.Compare,
          ast.Call, ast.FormattedValue, ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Starred,
          ast.Name, ast.List, ast.Tuple, ast.Slice, ast.expr_context, ast.boolop, ast.operator, ast.unaryop,
          ast.cmpop, ast.comprehension, ast.ExceptHandler, ast.arguments, ast.arg, ast.keyword, ast.alias,
          ast.withitem, ast.match_case, ast.MatchValue, ast.MatchSingleton, ast.MatchSequence, ast.MatchMapping,
          ast.MatchClass, ast.MatchStar, ast.MatchAs, ast.MatchOr)

SYNTAX_TYPES = frozenset(SYNTAX) | {sub for base in SYNTAX for sub in base.__subclasses__()}  # (exact types: fast)

STATEMENTS = {  # the statements with a rule of their own, and the method that applies it
    ast.Import: "_import", ast.ImportFrom: "_import",   # imports.py
    ast.FunctionDef: "_function",                       # here
    ast.ClassDef: "_class",                             # classes.py
    ast.Global: "_declare", ast.Nonlocal: "_declare",   # names.py
    ast.Assign: "_assign", ast.AnnAssign: "_assign",    # names.py (an alias of a module or a class)
}


class Syntax:
    """The rule's walk over statements, their parts and expressions."""

    # -- statements --

    def _stmt(self, node, scope: Scope) -> None:
        if type(node) not in SYNTAX_TYPES:
            return self.refuse(node, f"`{type(node).__name__}` ({self.text(node)}) is not admitted in the "
                                     "exercises; write plain functions, loops and NumPy/torch calls.")
        rule = STATEMENTS.get(type(node))
        if rule is not None:
            return getattr(self, rule)(node, scope)
        self._children(node, scope)

    def _children(self, node, scope: Scope) -> None:
        for _, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.stmt):
                    self._stmt(child, scope)
                elif isinstance(child, ast.expr):
                    self._expr(child, scope)
                elif isinstance(child, ast.AST):
                    self._part(child, scope)

    def _part(self, node, scope: Scope) -> None:
        """The pieces of a statement that are neither statements nor expressions."""
        if type(node) not in SYNTAX_TYPES:
            return self.refuse(node, f"`{type(node).__name__}` is not admitted in the exercises.")
        if isinstance(node, ast.MatchClass):  # `case Class(...)` reads attributes: values.py
            return self._match_class(node, scope)
        if isinstance(node, ast.ExceptHandler):  # `except E as err`: E is named as a class; err is bound
            if node.type is not None:
                self._expr(node.type, scope, classinfo=True)
            if node.name:
                self._binding_name(node, node.name, self.p.resolve(scope, node.name))
            for st in node.body:
                self._stmt(st, scope)
            return None
        if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:  # `case [x, *rest]`, `case ... as x`
            self._binding_name(node, node.name, self.p.resolve(scope, node.name))
        if isinstance(node, ast.MatchMapping) and node.rest:  # `case {**rest}`
            self._binding_name(node, node.rest, self.p.resolve(scope, node.rest))
        if isinstance(node, ast.comprehension) and node.is_async:
            self.refuse(node, "asynchronous code is not admitted in the exercises.")
        self._children(node, scope)

    def _function(self, node: ast.FunctionDef, scope: Scope) -> None:
        """``def``: its name and parameters are bindings (names.py); decorators, defaults and annotations
        are read where the ``def`` stands, the body in the function's own scope."""
        inner = self.p.scope_of[id(node)]
        self._binding_name(node, node.name, self._bound_where(scope, node.name), method=scope.kind == "class")
        if node.name.startswith("__") and node.name.endswith("__") and scope.kind != "class":
            pass  # (refused above)
        for d in node.decorator_list:
            self._expr(d, scope)
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self._expr(d, scope)
        for a in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
            self._binding_name(a, a.arg, inner)
            if a.annotation is not None:
                self._expr(a.annotation, scope, annotation=True)
        if node.returns is not None:
            self._expr(node.returns, scope, annotation=True)
        for st in node.body:
            self._stmt(st, inner)

    # -- expressions: each is given a kind --

    def _expr(self, node, scope: Scope, module_ok: bool = False, class_ok: bool = False, classinfo: bool = False,
              annotation: bool = False, call: ast.Call | None = None, field_ok: bool = False) -> Kind:
        """An expression where it is used: a module only as the base of an attribute (``module_ok``), a notebook
        class only called, subclassed, in ``isinstance`` or as ``Class.attribute`` (``class_ok``), an
        isinstance-only name only in ``isinstance`` and annotations (``classinfo``, ``annotation``), a dataclass
        ``Field`` only as a default in a @dataclass body (``field_ok``) and ``dataclasses.field`` only called, a
        refused builtin nowhere, a name that is a module or a class in one place and anything else in another
        nowhere."""
        kind = self._kind(node, scope, False, annotation=annotation, classinfo=classinfo, call=call)
        if kind.tag == "field" and not field_ok or kind.tag == "static" and kind.obj is dataclasses.field and (
                call is None and not annotation):
            self.refuse(node, f"`{self.text(node)}`: a dataclass field (dataclasses.field(...)) may only be written as "
                              "the default of an annotated name in a @dataclass class body (x: int = "
                              "field(default=0)): held anywhere else, the decorator would fill it with the "
                              "annotation's object (your class, say), which any value could then read.")
            return VALUE
        if kind.tag == "conflict":
            self.refuse(node, f"`{self.text(node)}` names a module or a library class here and something else "
                              "elsewhere (in another cell, or before this line runs); give each its own name.")
            return VALUE
        if kind.module and not module_ok:
            self.refuse(node, f"the module `{self.text(node)}` may only be used as `{self.text(node)}.name`: it "
                              "may not be stored, passed, called or returned.")
            return VALUE
        if kind.not_called and not (classinfo or annotation):
            self.refuse(node, f"`{self.text(node)}` may be named in isinstance and annotations only: "
                              f"{admitted.FAMILIES['arrays over a buffer'].split(';')[0]}; make arrays with "
                              "np.array, np.zeros or np.empty.")
            return VALUE
        if kind.tag == "class" and not (class_ok or classinfo or annotation):
            self.refuse(node, f"your class `{self.text(node)}` may only be called, subclassed, named in "
                              "isinstance or read as Class.attribute: passed on as a value, its methods could "
                              "be called on any object.")
            return VALUE
        if kind.tag == "builtin-refused":
            name = kind.text
            self.refuse(node, f"the builtin `{name}` is not admitted in the exercises (it reaches code by a name "
                              f"built at run time, or the machine); {ADVICE.get(name, YOURSELF)}.")
            return VALUE
        return kind

    def _kind(self, node, scope: Scope, quiet: bool, annotation=False, classinfo=False, call=None) -> Kind:
        if type(node) not in SYNTAX_TYPES:
            self.refuse(node, f"`{type(node).__name__}` ({self.text(node)}) is not admitted in the exercises.")
            return VALUE
        kind_of = type(node)
        if kind_of is ast.Name:
            return self._name(node, scope, quiet)
        if kind_of is ast.Attribute:
            return self._attribute(node, scope, quiet, annotation, call)
        if kind_of is ast.Call:
            return self._call(node, scope, quiet)
        if kind_of is ast.Subscript and not annotation:
            return self._subscript(node, scope, quiet)
        if quiet:
            if kind_of is ast.NamedExpr:  # (items that a name also holds may be changed through it)
                kind = self._kind(node.value, scope, True)
                return VALUE if kind.tag == "own-items" else kind
            if kind_of in (ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp, ast.GeneratorExp):
                return self.display_kind(node, scope)
            return VALUE
        if kind_of is ast.Tuple and (classinfo or annotation):
            for e in node.elts:
                self._expr(e, scope, classinfo=classinfo, annotation=annotation, class_ok=True)
            return VALUE
        if kind_of is ast.Subscript and annotation:
            self._expr(node.value, scope, annotation=True)
            self._expr(node.slice, scope, annotation=True)
            return VALUE
        if kind_of is ast.Lambda:
            return self._lambda(node, scope)
        if kind_of in COMPREHENSIONS:
            return self._comprehension(node, scope)
        if kind_of is ast.NamedExpr:
            return self._named_expr(node, scope)
        self._children(node, scope)
        return VALUE

    def _subscript(self, node: ast.Subscript, scope: Scope, quiet: bool) -> Kind:
        """``x[i]``: an item of the student's own items is one of the student's own objects (a slice of them, own
        items); anything else, a value."""
        if quiet:
            base = self._kind(node.value, scope, True)
        else:
            base = self._expr(node.value, scope)
            self._expr(node.slice, scope)
        if base.tag != "own-items" or not isinstance(node.ctx, ast.Load):
            return VALUE
        return OWN_ITEMS if isinstance(node.slice, ast.Slice) else OWN

    def _lambda(self, node: ast.Lambda, scope: Scope) -> Kind:
        inner = self.p.scope_of[id(node)]
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self._expr(d, scope)
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs + [
                a for a in (node.args.vararg, node.args.kwarg) if a]:
            self._binding_name(a, a.arg, inner)
        self._expr(node.body, inner)
        return VALUE

    def _comprehension(self, node, scope: Scope) -> Kind:
        """A comprehension has a scope of its own; its first iterable is read outside it; never async."""
        inner = self.p.scope_of[id(node)]
        for i, gen in enumerate(node.generators):
            if gen.is_async:
                self.refuse(node, "asynchronous code is not admitted in the exercises.")
            self._expr(gen.iter, scope if i == 0 else inner)
            self._expr(gen.target, inner)
            for cond in gen.ifs:
                self._expr(cond, inner)
        for part in ((node.key, node.value) if type(node) is ast.DictComp else (node.elt,)):
            self._expr(part, inner)
        return VALUE

    def _named_expr(self, node: ast.NamedExpr, scope: Scope) -> Kind:
        """``(x := value)``: x is bound in the function around any comprehension it stands in."""
        value = self._expr(node.value, scope)
        value = VALUE if value.tag == "own-items" else value
        target = scope
        while target.kind == "comprehension":
            target = target.parent
        self._binding_name(node.target, node.target.id, self._bound_where(target, node.target.id))
        return value
