"""Build plumbing stays out of sight: no cell a reader sees on the site glues numbers for the prose.

A chapter glues computed numbers with myst_nb's `glue` or the small helpers around it (`g`, `gl`,
`glue_row`, defined in hidden cells). Those calls belong in cells tagged `remove-cell` (or
`remove-input`), right after the visible cell that computed the values; shown, they read as if
they were course code. Read from the MyST sources, no build needed.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from IPython.core.inputtransformer2 import TransformerManager

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.md"))
HIDDEN = {"remove-cell", "remove-input"}
GLUE = {"glue", "g", "gl"}
FENCE = re.compile(r"^(`{3,})\{code-cell\}")


def code_cells(text):
    """Each `{code-cell}` of a MyST notebook as (line of its first code line, tags, code)."""
    lines, cells, i = text.splitlines(), [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        i += 1
        if not fence:
            continue
        end = next(j for j in range(i, len(lines)) if lines[j].strip() == fence[1])
        body, options = lines[i:end], {}
        if body and body[0].strip() == "---":               # YAML block of options
            close = body.index("---", 1)
            options, body = yaml.safe_load("\n".join(body[1:close])) or {}, body[close + 1:]
        else:                                               # `:key: value` lines
            while body and body[0].startswith(":"):
                options.update(yaml.safe_load(body.pop(0)[1:]))
        first = end - len(body) + 1                         # 1-based line of body[0]
        cells.append((first, set(options.get("tags", [])), "\n".join(body)))
        i = end + 1
    return cells


def calls(code):
    """(line within the code, name) of every call of a plain name."""
    tree = ast.parse(TransformerManager().transform_cell(code))
    return [(node.lineno, node.func.id) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]


def glue_helpers(cells):
    """The glue functions: `glue` and every function a hidden cell defines that calls one."""
    names, defs = set(GLUE), {}
    for _, tags, code in cells:
        if tags & HIDDEN:
            for node in ast.walk(ast.parse(TransformerManager().transform_cell(code))):
                if isinstance(node, ast.FunctionDef):
                    defs[node.name] = {name for _, name in calls(ast.unparse(node))}
    while new := {f for f, called in defs.items() if called & names} - names:
        names |= new
    return names


def test_the_parser_reads_both_option_styles_and_finds_glue_helpers():
    text = ("```{code-cell} ipython3\n:tags: [remove-cell]\n\ndef show(n, v):\n    gl(**{n: v})\n```\n"
            "```{code-cell} ipython3\n---\nmystnb:\n  image:\n    alt: x\ntags: [hide-input]\n---\n"
            "x = 1\nshow('x', x)\n```\n")
    cells = code_cells(text)
    assert [(line, tags) for line, tags, _ in cells] == [(3, {"remove-cell"}), (14, {"hide-input"})]
    assert "show" in glue_helpers(cells) and calls(cells[1][2]) == [(2, "show")]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_no_visible_cell_glues(chapter):
    """Every g(...)/gl(...)/glue(...) call (or a helper's) sits in a hidden cell."""
    cells = code_cells(chapter.read_text(encoding="utf-8"))
    helpers = glue_helpers(cells)
    shown = [f"chapters/{chapter.name}:{first + line - 1}: {name}(...) in a visible cell"
             for first, tags, code in cells if not tags & HIDDEN
             for line, name in calls(code) if name in helpers]
    assert not shown, "\n".join(shown)
