"""The pages a grading run writes, in a real browser (Debian's Chromium under Playwright, as tests/test_site.py
drives it), at desktop width in light and dark, on a phone (390 CSS px) and at 320 CSS px (issue 31, items 11,
14 and 15):

* the class report: 0 axe-core violations (WCAG 2.0/2.1 A and AA), nothing scrolls sideways and nothing clipped:
  every label of its figures and tables is whole and inside the box that shows it;
* a feedback page: the exercise's maths typeset (MathML, no raw TeX left, no script, its Content Security Policy
  unchanged), 0 axe-core violations, and a message that several tests share said once.

The pages' maths needs nothing but the course environment: the release's every formula is converted in Python."""
import datetime
import os
import re
from pathlib import Path

import pytest

from mha_grader.trusted import class_report, feedback, notebooks, report
from submissions import kit
from test_site import AXE, AXE_TAGS, chromium_path, launch_chromium

RELEASE = notebooks.load_release(kit.REPO / "exercises" / kit.ASSIGNMENT)
VIEWS = {"desktop light": {"viewport": {"width": 1280, "height": 900}, "color_scheme": "light"},
         "desktop dark": {"viewport": {"width": 1280, "height": 900}, "color_scheme": "dark"},
         "phone dark": {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "has_touch": True,
                        "color_scheme": "dark"},
         "320 px light": {"viewport": {"width": 320, "height": 640}, "color_scheme": "light"}}
HUGE_NAME = "E" * 150  # an exception class a student named (mistake labels may quote it)
REFUSAL = ("Not run: this notebook may not be graded as it stands. In the cell 'multi_head_attention', line 2: "
           "`torch._private` uses a private name (starting with _).")

# Every piece of text on the page that the eye cannot see whole: each text node's boxes, against the viewport and
# against every ancestor that clips what overflows it (an <svg>, or a box whose overflow is not visible).
CLIPPED_JS = """() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim() || node.parentElement.closest('annotation, title, style')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width === 0) continue;
      let bad = r.left < -0.5 || r.right > innerWidth + 0.5;
      for (let e = node.parentElement; e && e !== document.body && !bad; e = e.parentElement) {
        const style = getComputedStyle(e);
        if (e.tagName.toLowerCase() === 'svg' || style.overflowX !== 'visible') {
          const box = e.getBoundingClientRect();
          bad = r.left < box.left - 0.5 || r.right > box.right + 0.5;
        }
      }
      if (bad) { out.push(node.textContent.trim().slice(0, 60)); break; }
    }
  }
  return out;
}"""
SCROLLERS_JS = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
  .map(e => e.tagName.toLowerCase() + '.' + e.className + ' tabindex=' + e.getAttribute('tabindex'))"""


@pytest.fixture(scope="module")
def browser():
    exe = chromium_path()
    if exe is None:
        message = "Debian's Chromium is not installed (`make browser`); the browser tests need it"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    with launch_chromium(exe) as chromium:
        yield chromium


def class_report_page(tmp_path: Path) -> Path:
    """The class report of a class of 120: every test of the release, named mistakes (one quoting a student's
    150-character exception name), functions left unwritten, three late submissions (one student id an email)."""
    tests = [{"notebook": name, "test": g.id, "points": g.points, "passed": 90 - 7 * i, "failed": 30 + 7 * i}
             for name, release in RELEASE.items() for i, g in enumerate(release.grade_cells)]
    mistakes = [{"mistake": label, "notebook": notebook, "students": n, "kind": kind} for label, notebook, n, kind in [
        ("split_heads: reshape without transpose", "02_split_heads", 14, report.MISTAKE),
        ("output_projection_per_head: not written yet", "04_output_projection", 3, report.LEFT_UNWRITTEN),
        ("fuse_heads: heads interleaved (stacked on a new last axis, then reshaped)", "01_project", 2, report.MISTAKE),
        ("multi_head_attention: not written yet", "05_assembly", 2, report.LEFT_UNWRITTEN),
        (f"project: raises {HUGE_NAME}", "01_project", 1, report.MISTAKE)]]  # (as report.mistake_table sorts them)
    totals = [float(i % 16) for i in range(120)]
    late = [{"student": student, "seconds_late": 5.25 + 86400 * i, "penalty": 3.5 * (i > 0)}
            for i, student in enumerate(["bob", "firstname.lastname@university.example.edu",
                                         "a_student_id_from_the_lms"])]
    return class_report.write(tmp_path / "class_report.html", "mha", totals, 15, tests, mistakes,
                              (datetime.datetime(2026, 12, 1, 17), late))


def open_in(browser, path: Path, view: dict):
    context = browser.new_context(bypass_csp=True, **view)  # (only so that axe-core can be injected)
    page = context.new_page()
    page.goto(path.as_uri())
    return context, page


def axe(page) -> list[str]:
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run `make site-node` (make book does)")
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
                          ".then(r => r.violations.map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' '))"
                          ".slice(0, 3).join(', ')))", AXE_TAGS)
    return found


@pytest.mark.parametrize("view", VIEWS)
def test_the_class_report_shows_every_label_whole_and_passes_axe(browser, tmp_path, view):
    path = class_report_page(tmp_path)
    context, page = open_in(browser, path, VIEWS[view])
    try:
        problems = [f"axe: {v}" for v in axe(page)]
        problems += [f"clipped: {t!r}" for t in page.evaluate(CLIPPED_JS)]
        problems += [f"scrolls sideways: {e}" for e in page.evaluate(SCROLLERS_JS)]
        if page.evaluate("document.documentElement.scrollWidth") > VIEWS[view]["viewport"]["width"]:
            problems.append("the page scrolls sideways")
        assert problems == [], f"{view}:\n" + "\n".join(problems)
        names = page.evaluate("[...document.querySelectorAll('figure text, figure .name')].map(e => e.textContent)")
        expected = [f"{n.split('_', 1)[0]}/{g.id.removeprefix('test_')}" for n, r in RELEASE.items()
                    for g in r.grade_cells]
        assert set(expected) <= set(names) and not [n for n in names if "…" in n], names  # whole, never ellipsised
        heads = page.evaluate("[...document.querySelectorAll('tbody th')].map(e => e.textContent)")
        assert f"project: raises {HUGE_NAME}" in heads  # whole, broken where it must be, not cut
    finally:
        context.close()


def test_unwritten_functions_have_a_table_of_their_own(tmp_path):
    html = class_report_page(tmp_path).read_text()
    named, unwritten = html.split("<h2>Named mistakes</h2>")[1].split("<h2>Left unwritten</h2>")
    assert "not written yet" not in named and "reshape without transpose" in named
    assert "output_<wbr>projection_<wbr>per_<wbr>head" in unwritten and "multi_<wbr>head_<wbr>attention" in unwritten
    assert named.index("reshape without transpose") < named.index("heads interleave")  # 14 students before 2


def test_the_late_submissions_are_named_latest_first_with_how_late_and_the_penalty(tmp_path):
    text = kit.html_text(class_report_page(tmp_path)).split("Late submissions, latest first", 1)[1]
    assert text.index("a_student_id_from_the_lms") < text.index("firstname.lastname") < text.index("bob")
    assert "2 d 00:00:05" in text and "1 d 00:00:05" in text and "5.25 s" in text and "3.5" in text
    on_time = class_report.page("mha", [15.0], 15, [], [], (datetime.datetime(2026, 12, 1, 17), []))
    assert "Due 2026-12-01 17:00:00 UTC (with each student's extension): no submission was late." in on_time
    assert "Late submissions" not in class_report.page("mha", [15.0], 15, [], [])  # no due date, no one late


# --- feedback pages --------------------------------------------------------------------------------

def formulas(release) -> list[str]:
    """The release's formulas as its Markdown writes them ($...$ and $$...$$)."""
    text = "\n".join(notebooks.source(c) for c in release.cells if c.get("cell_type") == "markdown")
    return re.findall(r"\$\$.+?\$\$|\$[^$\n]+\$", text, re.S)


def refused(release) -> dict:
    tests = [{"id": g.id, "points": g.points, "score": 0.0, "message": REFUSAL,
              "mistake": "ready-made or forbidden code"} for g in release.grade_cells]
    return {"tests": tests, "notes": [], "status": "graded"}


@pytest.mark.parametrize("name", list(RELEASE))
def test_every_formula_of_the_release_is_typeset_with_no_node(name, monkeypatch):
    """With nothing on PATH (no node, no npm), each $...$ of the exercise becomes MathML whose annotation is
    its TeX; no formula is left as TeX on the page."""
    monkeypatch.setenv("PATH", "")
    feedback._rendered.cache_clear()
    page = feedback.page(RELEASE[name], {}, refused(RELEASE[name]), "s1")
    assert len(re.findall(r"<math display=", page)) == len(formulas(RELEASE[name])) > 0
    shown = re.sub(r"<annotation.*?</annotation>", "", page, flags=re.S)
    assert "$" not in re.sub(r"<[^>]+>", "", shown) and "\\" not in re.sub(r"<[^>]+>", "", shown.split("<h2>")[-1])
    assert "<script" not in page and f"content=\"{feedback.CSP}\"" in page and "default-src 'none'" in feedback.CSP


def test_only_inert_mathml_reaches_a_page():
    """The converter passes some TeX through as markup or links: such a formula stays TeX, as code."""
    for tex in (r"\href{javascript:alert(1)}{x}", r"\text{<img src=x onerror=alert(1)>}", r"\unknowncommand{x}",
                r"\frac{a}{", r"\color{red}{x}"):
        out = feedback.typeset(tex, display=False)
        assert out.startswith("<code>") and "<img" not in out and "href=" not in out, out


def test_a_message_shared_by_several_tests_is_said_once():
    release = RELEASE["05_assembly"]
    page = feedback.page(release, {}, refused(release), "s1")
    assert page.count("Not run: this notebook may not be graded") == 1
    assert page.count("for the same reason as <a href='#test-0'>") == len(release.grade_cells) - 1


@pytest.mark.parametrize("view", VIEWS)
def test_a_feedback_page_with_maths_in_a_browser(browser, tmp_path, view):
    """05_assembly (display formulas wider than a phone, a table): typeset, whole, no script, 0 axe violations."""
    release = RELEASE["05_assembly"]
    path = tmp_path / "05_assembly.html"
    path.write_text(feedback.page(release, {"multi_head_attention": "def multi_head_attention(q, k, v, mha):\n"
                                                                   "    return torch._private(q)\n"},
                                  refused(release), "s1"), encoding="utf-8")
    context, page = open_in(browser, path, VIEWS[view])
    try:
        assert page.evaluate("document.scripts.length") == 0
        boxes = page.evaluate("[...document.querySelectorAll('math')].map(m => m.getBoundingClientRect().width)")
        assert len(boxes) == len(formulas(release)) and min(boxes) > 0, boxes  # drawn, each
        text = page.evaluate("document.body.innerText")
        assert "$" not in text and "\\frac" not in text and text.count("Not run: this notebook") == 1
        problems = [f"axe: {v}" for v in axe(page)]
        problems += [f"clipped: {t!r}" for t in page.evaluate(CLIPPED_JS) if not page.evaluate(
            "t => [...document.querySelectorAll('.formula')].some(f => f.textContent.includes(t))", t)]
        if page.evaluate("document.documentElement.scrollWidth") > VIEWS[view]["viewport"]["width"]:
            problems.append("the page scrolls sideways")
        assert problems == [], f"{view}:\n" + "\n".join(problems)
    finally:
        context.close()
