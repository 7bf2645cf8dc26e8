"""The "no ready-made answer" policy, read from the source (static: no student code runs here).

The grader applies :func:`violations` outside the sandbox to the cells a student hands in; the
visible tests apply it to ``inspect.getsource`` of the function they test. It refuses what
could reach torch's own attention (under any of its names) or the course's answers, and the
means of naming something without writing its name:

* imports other than numpy, math, torch (torch.nn, torch.nn.functional), typing, functools,
  itertools, collections, dataclasses; any import of mha_lib, mha_checks or mha_grader;
* any attribute whose name starts with an underscore (torch._C, torch._native_multi_head_attention,
  ...) except ``__init__``, and dunder names;
* attribute names that are torch's attention entry points or ways around them: anything with
  "attention" in it, MultiheadAttention, Transformer*, forward, mro, ops, library, jit, compile,
  load, loads, hub;
* the builtins getattr, setattr, delattr, vars, eval, exec, compile, __import__, globals, locals,
  open, breakpoint, input (unless the student's code binds that name itself), and super() with
  arguments.

Each violation is one sentence with the line number and what to do instead. A student's own
helper that happens to be called ``scaled_dot_product_attention`` (defined with ``def``) is fine:
only attributes (``F.scaled_dot_product_attention``) and imports are refused.
"""
import ast

ALLOWED_MODULES = {"numpy", "math", "torch", "torch.nn", "torch.nn.functional", "typing", "functools",
                   "itertools", "collections", "dataclasses"}
COURSE_MODULES = {"mha_lib", "mha_checks", "mha_grader"}
ENTRY_POINTS = {"multi_head_attention_forward", "MultiheadAttention", "forward", "mro", "ops", "library", "jit",
                "compile", "load", "loads", "hub"}
BUILTINS = {"getattr", "setattr", "delattr", "vars", "eval", "exec", "compile", "__import__", "globals", "locals",
            "open", "breakpoint", "input"}
READY = "a ready-made answer that earns no credit"
YOURSELF = "compute it yourself with @, F.linear, reshape/transpose, torch.softmax and masked_fill"


def violations(source: str, function: str | None = None) -> list[str]:
    """Sentences saying what the source may not do, each with its line (empty: nothing refused).

    With ``function``, top-level expression statements (a try-it call such as ``mha(x, x, x)``
    or ``print(...)``) are not checked: definitions, imports and assignments are.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return [f"Line {err.lineno}: the code does not compile ({err.msg}); fix the syntax first."]
    body = tree.body if function is None else [s for s in tree.body if not isinstance(s, ast.Expr)]
    bound = _bound_names(tree)
    found: dict[int, str] = {}  # the first refusal of each line (ast.walk goes outside in)
    for statement in body:
        for node in ast.walk(statement):
            sentence = _judge_node(node, bound)
            line = getattr(node, "lineno", 0)
            if sentence and line not in found:
                found[line] = sentence
    return [f"Line {line}: {text}" for line, text in sorted(found.items())]


def _bound_names(tree) -> set[str]:
    """Names the student's code binds itself (parameters, assignments, defs, imports)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def _judge_node(node, bound: set[str]) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            text = _judge_module(alias.name)
            if text:
                return text
    if isinstance(node, ast.ImportFrom):
        module = "." * node.level + (node.module or "")
        text = _judge_module(module)
        if text:
            return text
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if full in ALLOWED_MODULES or alias.name == "*":
                continue
            text = _judge_attribute(alias.name, f"from {module} import {alias.name}")
            if text:
                return text
    if isinstance(node, ast.Attribute):
        return _judge_attribute(node.attr, _dotted(node))
    if isinstance(node, ast.Name):
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in {"__name__"}:
            return (f"`{node.id}` reaches Python's internals, which the exercises do not need; use the "
                    "arguments you are given and NumPy/torch functions.")
        if node.id in BUILTINS and node.id not in bound:
            return (f"the builtin `{node.id}` is not allowed in the exercises (it can reach code by a name "
                    "built at run time); write the attribute or call itself, e.g. mha.in_proj_weight.")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
        return "super() with arguments is not allowed; write super() without arguments."
    return None


def _judge_module(module: str) -> str | None:
    root = module.split(".")[0]
    if root in COURSE_MODULES:
        return (f"importing {module} is not allowed: the course's own code holds the ready-made answers, and a "
                f"graded function that uses one earns no credit; {YOURSELF}.")
    if module not in ALLOWED_MODULES:
        return (f"`import {module}` is not allowed; the exercises need only numpy, math, torch (torch.nn, "
                "torch.nn.functional), typing, functools, itertools, collections and dataclasses.")
    return None


def _judge_attribute(name: str, text: str) -> str | None:
    if name.startswith("_") and name != "__init__":
        return (f"`{text}` uses a private name (starting with _), which may hold torch's own attention "
                f"kernels, {READY}; use public NumPy/torch functions and {YOURSELF}.")
    if "attention" in name.lower() or name in ENTRY_POINTS or name.startswith("Transformer"):
        return (f"`{text}` is one of torch's attention entry points (or a way around them), {READY}; "
                f"{YOURSELF}.")
    return None


def _dotted(node: ast.Attribute) -> str:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if isinstance(value, ast.Name):
        parts.append(value.id)
    else:
        parts.append("...")
    return ".".join(reversed(parts))
