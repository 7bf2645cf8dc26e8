"""What the student reads: one HTML page per notebook, and the autograded notebook formgrader shows.

The page shows the exercise's own text and the student's answer cells, then every test with its
points and, for a failed one, the judge's whole message, wrapped. Test code (visible or hidden)
and hidden inputs never appear. The page reads on a phone (viewport, wrapping, nothing wider
than the screen).

Student text is only ever text: every string a submission can influence (answers, messages,
notes) is capped and HTML-escaped (text.for_html), and no maths or markup processing runs over
it. The page loads no script at all (the release's maths is shown as its TeX source), and says so
in a Content Security Policy that forbids every script and every request off the page itself.

:func:`render` builds both files as text where the job ran (a worker), from the release's
Markdown rendered once per process; :func:`write` only writes them, in the coordinating process.
"""
import base64
import copy
import functools
import hashlib
import json
import re
from pathlib import Path

from . import notebooks
from .text import for_html, printable, valid

MESSAGE_CAP = 4000   # characters of one test's message on the page
ANSWER_CAP = 20000   # characters of one answer cell on the page

STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#1b1b1b;background:#fff}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;padding:.6rem;border-radius:4px;font-size:14px}
.test{border-left:5px solid #888;padding:.3rem .8rem;margin:.8rem 0;background:#fafafa}
.pass{border-color:#1a7f37}.fail{border-color:#c62828}
.msg{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0 0}
.score{font-size:1.3rem;font-weight:600}.note{color:#555;font-style:italic}
.answer{border:1px solid #bbb;border-radius:4px;padding:.2rem .6rem;margin:.6rem 0}
table{display:block;overflow-x:auto;border-collapse:collapse}td,th{border:1px solid #999;padding:.2rem .4rem}
code,h1,h2,h3{overflow-wrap:anywhere}
@media (prefers-color-scheme: dark){body{background:#121212;color:#e6e6e6}pre{background:#1e1e1e}
.test{background:#1a1a1a}.note{color:#aaa}}
"""


def content_security_policy(style: str) -> str:
    """No script of any kind, no request anywhere: only the page's own <style> (by its hash) and inline images."""
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    return f"default-src 'none'; style-src 'sha256-{digest}'; img-src data:; base-uri 'none'; form-action 'none'"


CSP = content_security_policy(STYLE)


def render(release: notebooks.Release, nb: dict | None, result: dict, student: str) -> dict[str, str]:
    """{"page": the feedback page, "notebook": the autograded notebook as JSON text} (plain data: travels
    from a worker to the coordinating process with the job's result)."""
    answers = _answers(release, nb)
    return {"page": page(release, answers, result, student),
            "notebook": json.dumps(autograded_notebook(release, answers, result), indent=1)}


def page(release: notebooks.Release, answers: dict[str, str], result: dict, student: str) -> str:
    """The tests first (score, each verdict in full), then the exercise with the answers in place."""
    got, total = sum(t["score"] for t in result["tests"]), sum(t["points"] for t in result["tests"])
    what = {g.id: g.docstring for g in release.grade_cells}  # what each test checks
    parts = [f"<h1>{for_html(release.name)}</h1>",
             f"<p class='score'>Score: {got:g} / {total:g}</p>",
             *(f"<p class='note'>{for_html(n, MESSAGE_CAP)}</p>" for n in result["notes"]),
             *(_test(t, what.get(t["id"], "")) for t in result["tests"]),
             "<h2>The exercise and your answers</h2>"]
    for kind, value in _exercise(release):
        if kind == "html":
            parts.append(value)
        else:
            code = answers.get(value, "(no answer cell was found for this part)")
            parts.append(f"<div class='answer'><p>Your answer:</p><pre>{for_html(code, ANSWER_CAP)}</pre></div>")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Feedback: {for_html(release.name)} ({for_html(student)})</title><style>{STYLE}</style>"
            f"</head><body>{''.join(parts)}</body></html>")


@functools.lru_cache(maxsize=64)
def _rendered(name: str, cells: str) -> tuple[tuple[str, str], ...]:
    """The release's exercise as (("html", rendered Markdown) | ("answer", grade id)), in order."""
    from nbconvert.filters import markdown2html  # seconds to import: only where pages are rendered
    out, started = [], False  # the course's common header (restart, validate) is left out
    for cell in json.loads(cells):
        meta, src = notebooks.nbgrader_meta(cell), notebooks.source(cell)
        started = started or (cell.get("cell_type") == "markdown" and src.lstrip().startswith("#"))
        if cell.get("cell_type") == "markdown" and started:
            out.append(("html", re.sub(r"<a class=.anchor-link.*?</a>", "", markdown2html(src))))
        elif meta.get("solution"):
            out.append(("answer", meta["grade_id"]))
    return tuple(out)


def _exercise(release: notebooks.Release):
    """The release's rendered parts, rendered once per process and release (not once per notebook)."""
    return _rendered(release.name, json.dumps(release.cells, sort_keys=True))


def _test(test: dict, what: str) -> str:
    ok = test["score"] >= test["points"]
    head = f"{'✓ passed' if ok else '✗ failed'} · {test['score']:g} / {test['points']:g} point(s)"
    msg = "" if ok else f"<p class='msg'>{for_html(test['message'], MESSAGE_CAP)}</p>"
    return (f"<div class='test {'pass' if ok else 'fail'}'><strong>{for_html(head)}</strong>"
            f"<br><span>{for_html(what)}</span>{msg}</div>")


def _answers(release: notebooks.Release, nb: dict | None) -> dict[str, str]:
    """{solution grade id: the student's code for it}."""
    if nb is None:
        return {}
    prog = notebooks.program(release, nb)
    return {c["label"]: c["source"] for c in prog.cells if c["label"] in release.solutions}


def autograded_notebook(release: notebooks.Release, answers: dict[str, str], result: dict) -> dict:
    """The release with the student's answers in place and each test's result as its output."""
    out = {"cells": copy.deepcopy(release.cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    by_id = {t["id"]: t for t in result["tests"]}
    for cell in out["cells"]:
        meta = notebooks.nbgrader_meta(cell)
        if meta.get("solution") and meta["grade_id"] in answers:
            cell["source"] = valid(answers[meta["grade_id"]], ANSWER_CAP)
        if cell.get("cell_type") == "code":
            test = by_id.get(meta.get("grade_id"))
            passed = test is not None and test["score"] >= test["points"]
            text = "" if test is None else "passed\n" if passed else printable(test["message"], MESSAGE_CAP, "\n\t") + "\n"
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}] if text else []
            cell["execution_count"] = None
    return out


def write(folder: Path, autograded: Path, name: str, rendered: dict[str, str]) -> Path:
    """Write feedback/<student>/<assignment>/<name>.html and autograded/.../<name>.ipynb as rendered."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.html"
    target.write_text(rendered["page"], encoding="utf-8")
    autograded.mkdir(parents=True, exist_ok=True)
    (autograded / f"{name}.ipynb").write_text(rendered["notebook"], encoding="utf-8")
    return target
