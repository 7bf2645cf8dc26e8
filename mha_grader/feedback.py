"""What the student reads: one HTML page per notebook, and the autograded notebook formgrader shows.

The page shows the exercise's own text and the student's answer cells, then every test with its
points and, for a failed one, the judge's whole message, wrapped. Test code (visible or hidden)
and hidden inputs never appear. Math is typeset by the course's own MathJax copied next to the
pages (no CDN); the page reads on a phone (viewport, wrapping, nothing wider than the screen).
"""
import copy
import html
import json
import re
import shutil
from pathlib import Path

from nbconvert.filters import markdown2html

from . import notebooks

STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#1b1b1b;background:#fff}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;padding:.6rem;border-radius:4px;font-size:14px}
.test{border-left:5px solid #888;padding:.3rem .8rem;margin:.8rem 0;background:#fafafa}
.pass{border-color:#1a7f37}.fail{border-color:#c62828}
.msg{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0 0}
.score{font-size:1.3rem;font-weight:600}.note{color:#555;font-style:italic}
.answer{border:1px solid #bbb;border-radius:4px;padding:.2rem .6rem;margin:.6rem 0}
table{display:block;overflow-x:auto;border-collapse:collapse}td,th{border:1px solid #999;padding:.2rem .4rem}
mjx-container[display="true"]{display:block;overflow-x:auto;overflow-y:hidden;max-width:100%}
code,h1,h2,h3{overflow-wrap:anywhere}
@media (prefers-color-scheme: dark){body{background:#121212;color:#e6e6e6}pre{background:#1e1e1e}
.test{background:#1a1a1a}.note{color:#aaa}}
"""


def page(release: notebooks.Release, nb: dict | None, result: dict, student: str, mathjax: str) -> str:
    """The tests first (score, each verdict in full), then the exercise with the answers in place."""
    got, total = sum(t["score"] for t in result["tests"]), sum(t["points"] for t in result["tests"])
    answers = _answers(release, nb)
    what = {notebooks.nbgrader_meta(c).get("grade_id"): notebooks.docstring(notebooks.source(c))
            for c in release.cells}
    parts = [f"<h1>{html.escape(release.name)}</h1>",
             f"<p class='score'>Score: {got:g} / {total:g}</p>",
             *(f"<p class='note'>{html.escape(n)}</p>" for n in result["notes"]),
             *(_test(t, what.get(t["id"], "")) for t in result["tests"]),
             "<h2>The exercise and your answers</h2>"]
    started = False  # the course's common header (restart, validate) is left out
    for cell in release.cells:
        meta, src = notebooks.nbgrader_meta(cell), notebooks.source(cell)
        started = started or (cell.get("cell_type") == "markdown" and src.lstrip().startswith("#"))
        if cell.get("cell_type") == "markdown" and started:
            parts.append(re.sub(r"<a class=.anchor-link.*?</a>", "", markdown2html(src)))
        elif meta.get("solution"):
            code = answers.get(meta["grade_id"], "(no answer cell was found for this part)")
            parts.append(f"<div class='answer'><p>Your answer:</p><pre>{html.escape(code)}</pre></div>")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Feedback: {html.escape(release.name)} ({html.escape(student)})</title><style>{STYLE}</style>"
            + (f"<script>MathJax={{loader:{{load:['input/tex','output/chtml']}},"
               f"tex:{{inlineMath:[['$','$'],['\\\\(','\\\\)']]}}}};</script>"
               f"<script defer src='{html.escape(mathjax)}'></script>" if mathjax else "")
            + f"</head><body>{''.join(parts)}</body></html>")


def _test(test: dict, what: str) -> str:
    ok = test["score"] >= test["points"]
    head = f"{'✓ passed' if ok else '✗ failed'} · {test['score']:g} / {test['points']:g} point(s)"
    msg = "" if ok else f"<p class='msg'>{html.escape(test['message'])}</p>"
    return (f"<div class='test {'pass' if ok else 'fail'}'><strong>{html.escape(head)}</strong>"
            f"<br><span>{html.escape(what)}</span>{msg}</div>")


def _answers(release: notebooks.Release, nb: dict | None) -> dict[str, str]:
    if nb is None:
        return {}
    prog = notebooks.program(release, nb)
    return {c["label"]: c["source"] for c in prog.cells if c["label"] in release.solutions}


def autograded_notebook(release: notebooks.Release, nb: dict | None, result: dict) -> dict:
    """The release with the student's answers in place and each test's result as its output."""
    out = {"cells": copy.deepcopy(release.cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    answers, by_id = _answers(release, nb), {t["id"]: t for t in result["tests"]}
    for cell in out["cells"]:
        meta = notebooks.nbgrader_meta(cell)
        if meta.get("solution") and meta["grade_id"] in answers:
            cell["source"] = answers[meta["grade_id"]]
        if cell.get("cell_type") == "code":
            test = by_id.get(meta.get("grade_id"))
            text = "" if test is None else ("passed\n" if test["score"] >= test["points"] else test["message"] + "\n")
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}] if text else []
            cell["execution_count"] = None
    return out


def copy_mathjax(source: Path, feedback_root: Path) -> None:
    """The site's MathJax next to the feedback pages (once per run; nothing when the site is not built)."""
    if source.is_dir():
        shutil.copytree(source, feedback_root / "mathjax", dirs_exist_ok=True)


def write(folder: Path, autograded: Path, release: notebooks.Release, nb: dict | None, result: dict,
          student: str) -> Path:
    """Write feedback/<student>/<assignment>/<notebook>.html and its autograded notebook."""
    root = folder.parents[1]
    # the site's MathJax: components (startup.js + the loader list above), or one combined file
    scripts = [*(root / "mathjax").glob("startup.js"), *sorted((root / "mathjax").glob("tex-*.js"))]
    script = scripts[0] if scripts else None
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{release.name}.html"
    target.write_text(page(release, nb, result, student, f"../../mathjax/{script.name}" if script else ""))
    autograded.mkdir(parents=True, exist_ok=True)
    (autograded / f"{release.name}.ipynb").write_text(json.dumps(autograded_notebook(release, nb, result), indent=1))
    return target
