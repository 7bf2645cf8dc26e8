"""The nbgrader exercises, graded end to end through the real nbgrader commands.

One `nbgrader autograde` batch grades the reference solution, an empty submission and every
mutant of tests/submissions/mutants.py in a temporary copy of the course; then
`generate_feedback` and `export`. (The hostile batch runs beside it: test_exercises_hostile.py.)
"""
import json
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
    answers = [line.strip() for n in kit.NOTEBOOKS for src in kit.solution_cells(n).values()
               for line in src.splitlines() if len(line.strip()) > 20 and not line.strip().startswith(("def ", '"""'))]
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
                assert cells[i + 1]["cell_type"] == "code" and not cells[i + 1]["metadata"].get("nbgrader"), \
                    f"{n}: no free 'try it' cell after {m['grade_id']}"
            if m.get("grade"):
                assert "".join(cell["source"]).startswith('"""'), f"{n}/{m['grade_id']} opens without a docstring"
        points = [m["points"] for m in meta if m.get("grade")]
        assert points and all(p > 0 for p in points)
        prompts = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        assert re.search(r"\(\d+ points?\)", prompts), f"{n}: a prompt must state its points"


# --- the reference solution and the empty submission -----------------------------------------

def test_the_batch_graded_every_submission(catalogue, scores):
    assert catalogue.returncodes == {"autograde": 0, "feedback": 0, "export": 0}, catalogue.logs["autograde"][-3000:]
    assert {"s_solution", "s_empty", *(m.student for m in MUTANTS)} <= set(scores)


def test_solution_gets_full_marks(scores, max_scores):
    assert {n: {k: v for k, v in g.items() if k != "needs_manual_grade"}
            for n, g in scores["s_solution"].items()} == max_scores
    assert sum(sum(g.values()) for g in max_scores.values()) == 15


def test_empty_submission_gets_zero(scores, catalogue):
    got = scores["s_empty"]
    assert all(v == 0 for g in got.values() for k, v in g.items() if k != "needs_manual_grade")
    assert not any(g["needs_manual_grade"] for g in got.values())
    assert "it is not written yet" in catalogue.feedback("s_empty", "02_split_heads")


def test_grades_csv(catalogue):
    rows = {r["student_id"]: r for r in catalogue.grades_csv()}
    assert float(rows["s_solution"]["score"]) == 15.0 == float(rows["s_solution"]["max_score"])
    assert float(rows["s_empty"]["score"]) == 0.0


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


@pytest.fixture(scope="session")
def visible(catalogue):
    return {m.student: kit.visible_outcomes(kit.mutant_notebook(catalogue.course, m)) for m in MUTANTS}


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.student)
def test_visible_tests(mutant, visible):
    """Whether the visible tests alone let the mutant through is part of the catalogue's record."""
    assert all(visible[mutant.student].values()) is mutant.visible


def test_most_mutants_pass_the_visible_tests(visible):
    """Which is the point of hidden tests: the visible ones guide, they do not decide."""
    passing = [s for s, cells in visible.items() if all(cells.values())]
    assert len(passing) > len(MUTANTS) / 2, passing


def test_nbgrader_validate_is_what_students_run(graded):
    """The student's check passes the solved notebook and fails the unsolved one (exit status 0 both times)."""
    v = graded["validate"]
    assert v["returncode"] == 0
    assert "Success! Your notebook passes all the tests." in v["log"].split("unsolved.ipynb")[0]
    assert "VALIDATION FAILED" in v["log"].split("unsolved.ipynb")[1]


# --- what the feedback shows ------------------------------------------------------------------

def test_feedback_contains_no_hidden_test_code(graded):
    hidden = kit.hidden_test_lines(graded["catalogue"].course)
    assert len(hidden) > 30
    checked = 0
    for batch in (graded["catalogue"], graded["hostile"]):
        for html in (batch.course / "feedback").rglob("*.html"):
            text = kit.html_text(html)
            submitted = batch.course / "submitted" / html.parents[1].name / kit.ASSIGNMENT / f"{html.stem}.ipynb"
            own = submitted.read_text()  # a line the student wrote themselves is not a leak
            leaked = [line for line in hidden if line in text and json.dumps(line)[1:-1] not in own]
            assert not leaked, f"{html}: {leaked[:3]}"
            assert "BEGIN HIDDEN TESTS" not in text and "Traceback" not in text, html
            checked += 1
    assert checked > len(MUTANTS)


def test_autograded_notebooks_did_run_the_hidden_tests(catalogue):
    """The hidden tests ran (they are in the instructor's autograded copy), only the feedback hides them."""
    nb = kit.read(catalogue.course / "autograded" / "s_solution" / kit.ASSIGNMENT / "05_assembly.ipynb")
    assert "BEGIN HIDDEN TESTS" in json.dumps(nb)


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
    answers = {line.strip() for n in kit.NOTEBOOKS for src in kit.solution_cells(n).values()
               for line in src.splitlines() if len(line.strip()) > 25 and not line.strip().startswith(("def ", '"""'))}
    for path in SITE.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".ipynb", ".txt", ".js", ".json", ".md", ".py"}:
            text = path.read_text(errors="ignore")
            assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text, path
            assert not [a for a in answers if a in text], path
