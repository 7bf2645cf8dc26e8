"""The nbgrader exercises, graded end to end by the course's grader (`make grade`).

One run of ``python -m mha_grader grade`` grades the reference solution, an empty submission and
every mutant of tests/submissions/mutants.py in a temporary copy of the course (released by the
real `nbgrader generate_assignment`); then nbgrader's own export reads the gradebook. (The
hostile batch is graded beside it: test_exercises_hostile.py.)
"""
import re

import pytest

from submissions import kit
from submissions.mutants import MUTANTS


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    return kit.graded(tmp_path_factory.mktemp("grading"))


@pytest.fixture(scope="session")
def catalogue(graded):
    return graded["catalogue"]


@pytest.fixture(scope="session")
def scores(catalogue):
    return catalogue.scores()


@pytest.fixture(scope="session")
def max_scores(catalogue):
    return kit.max_scores(catalogue.course)


# --- the release -----------------------------------------------------------------------------

def test_release_in_git_is_what_generate_assignment_makes(catalogue):
    """exercises/ is only ever produced by `nbgrader generate_assignment`: regenerate and compare."""
    made = catalogue.course / "exercises" / kit.ASSIGNMENT
    committed = kit.REPO / "exercises" / kit.ASSIGNMENT
    assert sorted(p.name for p in made.iterdir()) == sorted(p.name for p in committed.iterdir())
    stale = [p.name for p in made.iterdir() if p.read_bytes() != (committed / p.name).read_bytes()]
    assert not stale, f"exercises/ is out of date for {stale}: run `make release` and commit the result"


def test_release_holds_no_solution_and_no_hidden_test():
    answers = [line for n in kit.NOTEBOOKS for line in kit.answer_lines(n, 20)]
    for path in (kit.REPO / "exercises").rglob("*.ipynb"):
        text = "".join("".join(kit._lines(c)) for c in kit.read(path)["cells"])
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, path
        assert not [a for a in answers if a in text], path


def test_every_exercise_follows_the_ps1_layout():
    """Header asking for restart-and-run-all, read-only setup, solution cell, try-it cell, grade cells with docstrings."""
    for n in kit.NOTEBOOKS:
        cells = kit.read(kit.REPO / "exercises" / kit.ASSIGNMENT / f"{n}.ipynb")["cells"]
        assert "restart the kernel and" in "".join(cells[0]["source"]).lower().replace("\n", " ")
        meta = [c["metadata"].get("nbgrader", {}) for c in cells]
        assert any(m.get("locked") and not m.get("grade") for m in meta), n
        for i, (cell, m) in enumerate(zip(cells, meta)):
            if m.get("solution"):
                assert "raise NotImplementedError()" in "".join(cell["source"]), n
                after = next(c for c in cells[i + 1:] if c["cell_type"] == "code")
                assert not after["metadata"].get("nbgrader"), f"{n}: no free 'try it' cell after {m['grade_id']}"
            if m.get("grade"):
                assert "".join(cell["source"]).startswith('"""'), f"{n}/{m['grade_id']} opens without a docstring"
        points = [m["points"] for m in meta if m.get("grade")]
        assert points and all(p > 0 for p in points)
        prompts = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        assert re.search(r"\(\d+ points?\)", prompts), f"{n}: a prompt must state its points"


# --- the reference solution and the empty submission -----------------------------------------

def test_the_grader_graded_every_submission(catalogue, scores):
    assert catalogue.run.returncode == 0, catalogue.run.stderr[-3000:]
    assert {"s_solution", "s_empty", *(m.student for m in MUTANTS)} <= set(scores)


def test_solution_gets_full_marks(scores, max_scores):
    assert {n: {k: v for k, v in g.items() if k != "needs_manual_grade"}
            for n, g in scores["s_solution"].items()} == max_scores
    assert sum(sum(g.values()) for g in max_scores.values()) == 31  # the README's points table: 3 + 2 + 2 + 3 + 5 + 9 + 7


def test_empty_submission_gets_zero(scores, catalogue):
    got = scores["s_empty"]
    assert all(v == 0 for g in got.values() for k, v in g.items() if k != "needs_manual_grade")
    assert not any(g["needs_manual_grade"] for g in got.values())
    assert "NotImplementedError" in catalogue.feedback("s_empty", "02_split_heads")


def test_nbgrader_export_reads_the_same_grades(catalogue):
    """The gradebook stays nbgrader's: its own export (what formgrader shows) agrees."""
    import csv
    run = kit.nbgrader(catalogue.course, "export")
    assert run.returncode == 0, run.stdout[-2000:]
    with open(catalogue.course / "grades.csv") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert float(rows["s_solution"]["score"]) == 31.0 == float(rows["s_solution"]["max_score"])
    assert float(rows["s_empty"]["score"]) == 0.0


def test_class_tables_next_to_the_grades(catalogue):
    import csv
    with open(catalogue.course / "grades_by_student.csv") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert float(rows["s_solution"]["total"]) == 31.0
    assert float(rows["s_solution"]["02_split_heads/test_split_heads_values"]) == 1.0
    with open(catalogue.course / "mistakes.csv") as fh:
        mistakes = list(csv.DictReader(fh))
    assert mistakes and all(int(m["students"]) >= 1 for m in mistakes)
    assert "Top mistakes (students)" in catalogue.run.stdout


# --- the mutants ------------------------------------------------------------------------------

def test_catalogue_is_large_enough():
    assert len(MUTANTS) >= 15
    assert len({m.student for m in MUTANTS}) == len(MUTANTS)
    assert {m.notebook for m in MUTANTS} == set(kit.NOTEBOOKS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.student)
def test_mutant_loses_exactly_its_points(mutant, scores, max_scores):
    got = {k: v for k, v in scores[mutant.student][mutant.notebook].items() if k != "needs_manual_grade"}
    full = max_scores[mutant.notebook]
    assert set(mutant.lost) <= set(full), f"unknown cells in {mutant.lost}"
    assert got == {cell: full[cell] - mutant.lost.get(cell, 0) for cell in full}


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.student)
def test_feedback_names_the_mistake(mutant, catalogue):
    text = catalogue.feedback(mutant.student, mutant.notebook)
    assert text is not None, f"no feedback for {mutant.student}"
    assert mutant.says in text, f"the feedback of {mutant.student} does not say {mutant.says!r}"


# --- what the feedback shows ------------------------------------------------------------------

def test_feedback_shows_no_test_code_and_reads_on_a_phone(graded):
    checked = 0
    for batch in (graded["catalogue"], graded["hostile"]):
        for page in (batch.course / "feedback").rglob("*.html"):
            raw = page.read_text()
            assert "grading." not in raw and "check_" not in raw and "hidden_cases" not in raw, page
            assert "Traceback" not in raw, page
            assert 'name=\'viewport\'' in raw and "pre-wrap" in raw, page
            assert "http://" not in raw and "https://" not in raw, page  # nothing loaded from anywhere
            assert len(raw) < 200_000, f"{page}: {len(raw)} bytes"
            checked += 1
    assert checked > len(MUTANTS)


def test_feedback_pages_load_no_script_under_a_policy_that_forbids_it(graded):
    """No MathJax (no npm on a grading machine) and no script at all: the maths is typeset as MathML when the page
    is made (its TeX kept only as the MathML's annotation)."""
    for batch in (graded["catalogue"], graded["hostile"]):
        for page in (batch.course / "feedback").rglob("*.html"):
            raw = page.read_text()
            assert "<script" not in raw.lower(), page
            assert re.search(r"<meta http-equiv='Content-Security-Policy' content=\"default-src 'none';", raw), page
    page = graded["catalogue"].course / "feedback" / "s_solution" / kit.ASSIGNMENT / "01_project.html"
    raw = page.read_text()
    assert "<math display=" in raw and "$" not in re.sub(r"<annotation.*?</annotation>", "", raw, flags=re.S)


def test_grades_never_run_the_notebooks_test_cells(catalogue):
    """The autograded copy formgrader shows carries the judge's verdicts as the test cells' outputs."""
    nb = kit.read(catalogue.course / "autograded" / "s_solution" / kit.ASSIGNMENT / "05_assembly.ipynb")
    outputs = [o["text"] for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")
               for o in c.get("outputs", [])]
    assert outputs and all(t == "passed\n" for t in outputs)


# --- the website ------------------------------------------------------------------------------

SITE = kit.REPO / "_build" / "html"


@pytest.mark.skipif(not (SITE / "chapters" / "exercises.html").exists(), reason="the site is not built (make book)")
def test_site_offers_the_student_versions_and_nothing_else():
    page = (SITE / "chapters" / "exercises.html").read_text()
    links = re.findall(r'href="\.\./(_downloads/[^"]+\.ipynb)"', page)
    assert sorted(p.split("/")[-1] for p in links) == [f"{n}.ipynb" for n in kit.NOTEBOOKS]
    for link in links:
        served = (SITE / link).read_bytes()
        assert served == (kit.REPO / "exercises" / kit.ASSIGNMENT / link.split("/")[-1]).read_bytes()
    answers = {line for n in kit.NOTEBOOKS for line in kit.answer_lines(n, 25)}
    for path in SITE.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".ipynb", ".txt", ".js", ".json", ".md", ".py"}:
            text = path.read_text(errors="ignore")
            assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text, path
            assert not [a for a in answers if a in text], path
