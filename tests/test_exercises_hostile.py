"""Hostile submissions, graded in one batch by the course's grader: each ends with a recorded
score, every other student's grade and feedback intact, the course files unchanged, and no
process left behind. The catalogue and what each must score: tests/submissions/hostile.py."""
import subprocess

import pytest

from mha_grader.walls import sandbox
from submissions import kit
from submissions.hostile import FULL, HOSTILE


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    return kit.graded(tmp_path_factory.mktemp("grading"))["hostile"]


@pytest.fixture(scope="session")
def scores(hostile):
    return hostile.scores()


def test_the_batch_ends_with_every_student_recorded(hostile, scores):
    assert hostile.run.returncode == 0, hostile.run.stderr[-3000:]
    assert set(scores) == {h.student for h in HOSTILE}


@pytest.mark.parametrize("case", HOSTILE, ids=lambda h: h.student)
def test_score(case, scores):
    got = {nb: sum(v for k, v in cells.items() if k != "needs_manual_grade")
           for nb, cells in scores[case.student].items()}
    assert got == {nb: case.points.get(nb, 0) for nb in FULL}
    assert not any(cells["needs_manual_grade"] for cells in scores[case.student].values())


@pytest.mark.parametrize("case", [h for h in HOSTILE if h.says], ids=lambda h: h.student)
def test_feedback_says_what_happened(case, hostile):
    for notebook, phrase in case.says.items():
        text = hostile.feedback(case.student, notebook)
        assert text is not None and phrase in text, f"{case.student}/{notebook}: {phrase!r} missing"


def test_course_files_are_unchanged(hostile):
    assert kit.course_files(hostile.course) == hostile.files_before


def test_nothing_handed_in_beside_the_notebooks_reaches_the_feedback(hostile):
    folder = hostile.course / "feedback" / "h17_symlinks_and_extra_files" / kit.ASSIGNMENT
    assert sorted(p.name for p in folder.iterdir()) == [f"{n}.html" for n in kit.NOTEBOOKS]
    assert not any(p.is_symlink() for p in (hostile.course / "feedback").rglob("*"))
    assert "root:" not in "".join(p.read_text() for p in folder.iterdir())


def test_feedback_is_small_whatever_was_printed(hostile):
    page = hostile.course / "feedback" / "h09_huge_output" / kit.ASSIGNMENT / "01_project.html"
    assert page.stat().st_size < 100_000


def test_no_solution_or_gradebook_content_reaches_a_student(hostile):
    text = hostile.feedback("h12_reads_course_files", "01_project")
    answer = [line.strip() for line in kit.solution_cells("01_project")["project"].splitlines()
              if len(line.strip()) > 12 and not line.strip().startswith(("def ", '"""'))]
    assert answer and not [line for line in answer if line in text]
    assert "BEGIN SOLUTION" not in text and "SQLite" not in text and "np.fromfile" in text  # refused, never run


def test_no_process_is_left_behind(hostile):
    out = subprocess.run(["ps", "-eo", "uid="], capture_output=True, text=True).stdout.split()
    assert not [u for u in out if sandbox.UID_BASE <= int(u) < sandbox.UID_BASE + sandbox.SLOTS]
