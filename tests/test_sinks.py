"""Student text in what the instructor opens: the terminal, the CSV files, the feedback pages and the
class report. Terminal escapes, carriage returns, bidi overrides, formulas, HTML/TeX links and a 2 MB
class name reach each sink only as inert, capped text; a folder whose name ends in a newline is no
student. Also: the progress bar and the summary fit an 80-column terminal."""
import csv
import io
import json
import os
import pty
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from mha_grader.trusted import class_report, report, text
from submissions import kit

P = "01_project"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ESCAPES = "Err\\x1b]0;owned\\x07\\x1b[2J\\x1b[1;1H\\rThis run graded 0 notebook(s)\\u202e"
HOSTILE = {  # student -> the answer of project()
    "h_escapes": f"def project(x, w, b=None):\n    raise type('{ESCAPES}', (Exception,), {{}})('\\x1b[31mred\\r\\nfake')\n",
    "h_href": "def project(x, w, b=None):\n    raise ValueError(r'\\href{javascript:alert(1)}{click} $\\href{javascript:"
              "alert(2)}{x}$ <script>alert(3)</script><img src=x onerror=alert(4)>')\n",
    "h_huge_name": "def project(x, w, b=None):\n    raise type('E' * 2_000_000, (Exception,), {})('big')\n",
}
PHANTOM = "a00_honest_first\n"


# --- the per-sink functions ---------------------------------------------------------------------

@pytest.mark.parametrize("sink", [text.for_terminal, text.for_csv])
def test_no_control_character_reaches_a_terminal_or_a_cell(sink):
    hostile = "a\x1b]0;title\x07b\x1b[2J\rc\u202ed\u2066e\x00f\x9bg\ud800h\ni"
    out = sink(hostile)
    assert not CONTROL.search(out), out
    assert all(unicodedata.category(c) not in {"Cc", "Cf", "Cs"} for c in out), out
    assert "\\x1b" in out and "\\u202e" in out  # shown, not dropped: the instructor sees what was there


def test_csv_cells_are_never_formulas_and_numbers_stay_numbers():
    for formula in ("=HYPERLINK(\"x\")", "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert not text.for_csv(formula).startswith(("=", "+", "-", "@", "\t", "\r")), formula
    assert text.for_csv("=1+1") == "'=1+1"
    assert text.for_csv(2.5) == 2.5 and text.for_csv("s001_alice") == "s001_alice"


def test_every_sink_caps_and_makes_valid_text():
    huge = "E" * 2_000_000 + "\udcff"
    assert len(text.for_terminal(huge)) <= text.TERMINAL_CAP
    assert len(text.for_csv(huge)) <= text.CSV_CAP
    html = text.for_html(huge)
    assert len(html) <= text.HTML_CAP and html.encode("utf-8")
    assert text.for_html("<script>&'\"") == "&lt;script&gt;&amp;&#x27;&quot;"


# --- the progress bar and the summary at 80 columns ---------------------------------------------

PROGRESS = """
import sys, time
from mha_grader.trusted import report
report.status("checking that the sandbox isolates student code (probe)")
bar = report.Progress(1000, "Dask")
for i in range(1000):
    bar.step()
    if i % 100 == 0:
        time.sleep(0.35)
bar.done()
"""


def test_progress_fits_80_columns_in_a_terminal():
    """In a pseudo-terminal 80 columns wide: every redraw fits (no wrapped row), the run says what it
    does before the first result, and the ETA shows once results come in."""
    import fcntl
    import struct
    import termios
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(kit.REPO), "COLUMNS": "80", "LINES": "24"}
    proc = subprocess.Popen([sys.executable, "-c", PROGRESS], stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(parent, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(parent)
    out = b"".join(chunks).decode()
    assert proc.returncode == 0, out
    redraws = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", s) for s in re.split(r"[\r\n]", out)]
    redraws = [s for s in redraws if s.strip()]
    assert redraws[0].startswith("mha_grader: checking that the sandbox isolates"), redraws[:3]
    assert any("waiting for the first result" in s for s in redraws), redraws[:5]
    assert any("ETA" in s for s in redraws) and any("1000/1000" in s for s in redraws)
    assert max(len(s) for s in redraws) <= 80, max(redraws, key=len)


def _results(students: int) -> tuple[list[float], list[dict]]:
    totals = [float(i % 16) for i in range(students)]
    mistakes = [{"mistake": f"split_heads: mistake number {i} with a long description of what went wrong",
                 "notebook": "02_split_heads", "students": 40 - i, "who": ""} for i in range(30)]
    return totals, mistakes


def test_summary_of_200_students_fits_one_80_by_24_screen():
    totals, mistakes = _results(200)
    failed = [{"student": f"s{i:03d}_a_rather_long_student_id", "notebook": P, "error": "InfraError: " + "x" * 300}
              for i in range(12)]
    notes = [f"submitted/x{i}\n: not a valid student id; ignored" for i in range(40)]
    lines = report.screen(totals, 15, mistakes, [None] * 1000, failed, notes, Path("class_report.html"))
    assert len(lines) + 1 <= 24, "\n".join(lines)  # + the line with the run's timing
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    shown = "\n".join(lines)
    assert "s000_a_rather_long_student_id/01_project" in shown  # an id is shown whole, never cut
    assert "This run graded 1000 notebook(s)." in shown and "class_report.html" in shown
    assert not CONTROL.search(shown)


def test_class_report_has_figures_and_real_tables():
    totals, mistakes = _results(200)
    tests = [{"notebook": P, "test": f"test_{i}", "points": 1, "passed": 150 - i, "failed": 50 + i} for i in range(6)]
    page = class_report.page("mha", totals, 15, tests, mistakes)
    assert page.count("class='chart' role='img'") == 2 and page.count("aria-label=") == 2  # two figures, named
    assert page.count("<svg") == 6 + 5 and page.count("aria-hidden='true'") == 11  # their bars, hidden from readers
    assert "<th scope='col'>" in page and "<th scope='row'>" in page and "<caption>" in page
    assert "Content-Security-Policy" in page and "<script" not in page
    assert "mistake number 0 with" in page and ">40<" in page  # a named mistake, with how many students
    assert "name='viewport'" in page


# --- end to end: hostile text beside honest students --------------------------------------------

pytestmark_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("sinks") / "course")
    honest = {P: kit.filled(course, P)}
    for student in ("a00_honest_first", "z99_honest_last"):
        kit.submit(course, student, honest)
    kit.submit(course, PHANTOM, honest)
    for student, answer in HOSTILE.items():
        kit.submit(course, student, {P: kit.filled(course, P, {"project": answer})})
    # The rule off: it refuses type(name, ...) before anything runs, and the sinks must hold without it.
    run = kit.grade(course, "--workers", "2", "--test-seconds", "5", "--notebook-seconds", "20", rule=False)
    return course, run


@pytestmark_root
def test_hostile_text_reaches_no_sink_alive(graded):
    course, run = graded
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert not CONTROL.search(log), repr(CONTROL.search(log))
    assert len(log) < 20_000
    for name in ("grades_by_student.csv", "mistakes.csv", "tests.csv"):
        raw = (course / name).read_text(encoding="utf-8")
        assert len(raw) < 100_000, name
        for row in csv.reader(io.StringIO(raw)):
            for cell in row:
                assert not CONTROL.search(cell) and not cell.startswith(("=", "+", "-", "@")), (name, cell[:200])
    for page in (course / "feedback").rglob("*.html"):
        raw = page.read_text(encoding="utf-8")
        assert "http-equiv='Content-Security-Policy'" in raw and "default-src 'none'" in raw, page
        assert "<script" not in raw.lower() and "<img" not in raw.lower(), page
        assert not CONTROL.search(raw), (page, repr(CONTROL.search(raw)))
        assert not re.search(r"href\s*=\s*['\"]?\s*javascript", raw, re.I), page
        assert len(raw) < 200_000, page


@pytestmark_root
def test_a_folder_name_with_a_newline_is_no_student_and_is_reported_once(graded):
    course, run = graded
    log = run.stdout + run.stderr
    assert log.count("a00_honest_first\\x0a") == 1, log[-3000:]
    rows = list(csv.DictReader((course / "grades_by_student.csv").open(encoding="utf-8")))
    assert [r["student"] for r in rows].count("a00_honest_first") == 1
    assert len(rows) == 2 + len(HOSTILE)


@pytestmark_root
def test_honest_students_keep_full_marks_and_attackers_lose_the_project_tests(graded):
    course, _ = graded
    scores = kit.scores(course)
    full = sum(kit.max_scores(course)[P].values())
    project_tests = [t["id"] for t in json.loads((course / "autograded" / "a00_honest_first" / kit.ASSIGNMENT /
                                                  f"{P}.result.json").read_text())["tests"]
                     if t["id"].startswith("test_project")]
    for student in ("a00_honest_first", "z99_honest_last"):
        assert sum(v for k, v in scores[student][P].items() if k != "needs_manual_grade") == full
    lost = sum(kit.max_scores(course)[P][t] for t in project_tests)
    for student in HOSTILE:
        got = sum(v for k, v in scores[student][P].items() if k != "needs_manual_grade")
        assert got == full - lost, (student, scores[student][P])


@pytestmark_root
def test_no_script_runs_on_a_feedback_page_in_a_browser(graded):
    """Chromium opens every hostile student's page: no script element, no javascript: link, no dialog."""
    exe = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        pytest.skip("Debian's Chromium is not installed (`make browser`)")
    from playwright.sync_api import sync_playwright
    from test_site import CHROMIUM_ARGS

    course, _ = graded
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            for student in HOSTILE:
                target = course / "feedback" / student / kit.ASSIGNMENT / f"{P}.html"
                page.goto(target.as_uri())
                assert page.evaluate("document.scripts.length") == 0
                assert page.evaluate("document.querySelectorAll('a[href^=\"javascript\"], img').length") == 0
                for link in page.locator("a").all():
                    link.click(timeout=2000)
            assert dialogs == []
        finally:
            browser.close()
