"""What the student reads: one HTML page per notebook, and the autograded notebook formgrader shows.

The page shows every test with its points and, for a failed one, the judge's whole message,
wrapped (a message that several tests share, such as a refusal or a cell that does not compile, is
said once: the later tests point to it), then the exercise's own text and the student's answer
cells. Test code (visible or hidden) and hidden inputs never appear. The page reads on a phone
(viewport, wrapping, nothing wider than the screen).

The release's maths is typeset when the page is made, as the site's is when it is built, but in
Python (latex2mathml, a requirement of the course environment: grading needs no Node or npm): each
formula becomes MathML, which the browser typesets and screen readers read, with its TeX kept as
the MathML's annotation. Only the release's text goes through it.

Student text is only ever text: every string a submission can influence (answers, messages,
notes) is capped and HTML-escaped (text.for_html), and no maths or markup processing runs over
it. The page loads no script at all, and says so in a Content Security Policy that forbids every
script and every request off the page itself.

:func:`render` builds both files as text where the job ran (a worker), from the release's
Markdown rendered once per process; :func:`write` only writes them, in the coordinating process.
"""
import base64
import copy
import functools
import hashlib
import html
import json
import re
from pathlib import Path
from xml.etree import ElementTree

from . import notebooks
from .text import for_html, printable, valid

MESSAGE_CAP = 4000   # characters of one test's message on the page
MATHML = "http://www.w3.org/1998/Math/MathML"
MATHML_ELEMENTS = frozenset(  # presentation MathML that draws and does nothing else (no href, no actions)
    "mrow mi mn mo ms mtext mspace msub msup msubsup munder mover munderover mfrac msqrt mroot mstyle mpadded "
    "mphantom menclose mtable mtr mtd".split())
NAMED_SPACES = {"thinmathspace": "0.167em", "thickmathspace": "0.278em", "negativethinmathspace": "-0.167em",
                "negativemediummathspace": "-0.222em", "negativethickmathspace": "-0.278em"}  # (not in MathML Core)
MATHML_ATTRIBUTES = frozenset(
    "display mathvariant stretchy minsize maxsize width height depth lspace rspace fence separator accent "
    "accentunder movablelimits largeop symmetric form columnalign rowalign columnlines rowlines columnspacing "
    "rowspacing displaystyle scriptlevel linethickness notation".split())
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
.formula{display:block;overflow-x:auto;padding:.2rem 0}.formula:focus-visible{outline:2px solid;outline-offset:-2px}
a{color:#0b57d0}
@media (prefers-color-scheme: dark){body{background:#121212;color:#e6e6e6}pre{background:#1e1e1e}
.test{background:#1a1a1a}.note{color:#aaa}a{color:#8ab4f8}}
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
             *_tests(result["tests"], what),
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
    out, started = [], False  # the course's common header (restart, validate) is left out
    for cell in json.loads(cells):
        meta, src = notebooks.nbgrader_meta(cell), notebooks.source(cell)
        started = started or (cell.get("cell_type") == "markdown" and src.lstrip().startswith("#"))
        if cell.get("cell_type") == "markdown" and started:
            out.append(("html", re.sub(r"<a class=.anchor-link.*?</a>", "", _markdown(src))))
        elif meta.get("solution"):
            out.append(("answer", meta["grade_id"]))
    return tuple(out)


def _exercise(release: notebooks.Release):
    """The release's rendered parts, rendered once per process and release (not once per notebook)."""
    return _rendered(release.name, json.dumps(release.cells, sort_keys=True))


def _markdown(source: str) -> str:
    """The release's Markdown as HTML (nbconvert's renderer), its maths typeset (see :func:`typeset`)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath  # seconds to import

    class Typeset(IPythonRenderer):
        def block_math(self, body: str) -> str:
            return typeset(body, display=True)

        def inline_math(self, body: str) -> str:
            return typeset(body, display=False)

        def latex_environment(self, name: str, body: str) -> str:
            return typeset(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)

    return MarkdownWithMath(renderer=Typeset(escape=False)).render(source)


def typeset(tex: str, display: bool) -> str:
    """One formula of the release as MathML, its TeX kept as the annotation. Only MathML elements and attributes
    known to be inert are kept (the converter passes some TeX through as markup: ``\\text{<b>}``, ``\\href``); a
    formula with anything else, or that the converter cannot read, is shown as its TeX, as code."""
    from latex2mathml.converter import convert
    try:
        tree = ElementTree.fromstring(convert(tex.strip(), display="block" if display else "inline"))
        body = "".join(_mathml(child) for child in tree)
    except Exception:  # noqa: BLE001 - unreadable TeX, markup, an unknown command: the formula stays TeX
        return f"<code>{html.escape(tex)}</code>"
    mathml = (f"<math display='{'block' if display else 'inline'}'><semantics><mrow>{body}</mrow>"
              f"<annotation encoding='application/x-tex'>{html.escape(tex.strip())}</annotation></semantics></math>")
    # a displayed formula wider than a phone scrolls in its own box, which the keyboard reaches (a Tab stop)
    return f"<span class='formula' tabindex='0' role='group' aria-label='formula'>{mathml}</span>" if display \
        else mathml


def _mathml(node) -> str:
    """A converted element as HTML, if it and all inside it are known MathML (else ValueError)."""
    tag = node.tag.removeprefix(f"{{{MATHML}}}")
    unknown = set(node.attrib) - MATHML_ATTRIBUTES
    if tag not in MATHML_ELEMENTS or unknown or "\\" in (node.text or ""):  # (a backslash: a command not converted)
        raise ValueError(f"not typeset: <{tag}> {sorted(unknown)} {node.text!r}")
    attributes = "".join(f" {k}='{html.escape(NAMED_SPACES.get(v, v), quote=True)}'" for k, v in sorted(node.attrib.items()))
    inner = html.escape(node.text or "", quote=False) + "".join(
        _mathml(child) + html.escape(child.tail or "", quote=False) for child in node)
    return f"<{tag}{attributes}>{inner}</{tag}>"


def _tests(tests: list[dict], what: dict[str, str]) -> list[str]:
    """Each test's verdict; a failed test's message is written in full once, and a later test that failed for
    the same words points to it (a refused notebook: one paragraph, not one per test)."""
    shown: dict[str, tuple[int, str]] = {}  # message -> (index, id) of the test that shows it
    out = []
    for i, test in enumerate(tests):
        ok = test["score"] >= test["points"]
        head = f"{'✓ passed' if ok else '✗ failed'} · {test['score']:g} / {test['points']:g} point(s)"
        if ok:
            msg = ""
        elif test["message"] in shown:
            first, name = shown[test["message"]]
            msg = (f"<p class='msg'>Not passed, for the same reason as <a href='#test-{first}'>{for_html(name)}</a> "
                   "above.</p>")
        else:
            shown[test["message"]] = (i, test["id"])
            msg = f"<p class='msg'>{for_html(test['message'], MESSAGE_CAP)}</p>"
        out.append(f"<div class='test {'pass' if ok else 'fail'}' id='test-{i}'><strong>{for_html(head)}</strong> "
                   f"<span class='id'>{for_html(test['id'])}</span><br><span>{for_html(what.get(test['id'], ''))}"
                   f"</span>{msg}</div>")
    return out


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
