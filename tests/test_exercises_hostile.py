"""Hostile submissions, graded in ONE `nbgrader autograde` batch: what nbgrader does with each.

The record below is what nbgrader 0.9.6 does under nbgrader_config.py. Three cases are fixed by
that configuration (stock behaviour in brackets):
  * deleted test cells, or test cells whose nbgrader metadata was stripped: put back and run
    (stock: 0 points and "needs manual grading" forever) -- OverwriteCells.add_missing_cells;
  * one cell with an unreadable schema_version: its metadata is dropped and the test cell put back
    (stock: SchemaTooOldError stops the WHOLE batch; nobody after that student is graded) --
    DropUnreadableMetadata;
  * hidden tests never reach the feedback (stock: their code and tracebacks do) -- test_exercises.py.
The others pin down stock behaviour for the later sandboxing / tamper-proofing / crash-fairness
work: a notebook whose kernel crashes or hangs is not graded at all (None: "needs manual
grading"), the student's autograded folder is deleted (no feedback at all), while notebooks graded
before it keep their points in the gradebook; a 100 MB print passes through to the feedback; a
monkeypatched check wins full marks for a wrong answer.
"""
import json

import pytest

from submissions import kit
from submissions.hostile import HOSTILE

# student: (points per submitted notebook, None = not graded; whether autograde reported an error
# for this student; phrases of the autograde log that tell the instructor why)
RECORD = {
    "h00_honest_first": ({"01_project": 3, "05_assembly": 5}, False, []),
    "h01_edited_locked_cells": ({"02_split_heads": 1}, False,
                                ["Attribute 'checksum' for cell setup_02 has changed",
                                 "Attribute 'checksum' for cell test_split_heads_values has changed"]),
    "h02_deleted_test_cells": ({"02_split_heads": 2}, False,
                               ["Missing grade cell test_split_heads_shape encountered, adding to notebook"]),
    "h03_stripped_test_metadata": ({"03_merge_heads": 2}, False,
                                   ["Missing grade cell test_merge_heads_values encountered, adding to notebook"]),
    "h04_stripped_all_metadata": ({"01_project": None}, True,
                                  ["Missing grade cell test_project_values encountered", "KeyError: 'project'"]),
    "h05_broken_schema_version": ({"02_split_heads": 2}, False,
                                  ["unreadable nbgrader metadata (SchemaTooOldError"]),
    "h06_infinite_loop": ({"01_project": 3, "02_split_heads": 0}, False,
                          ["Timeout waiting for execute reply (10s)", "Interrupting kernel"]),
    "h07_swallowed_interrupt": ({"01_project": 3, "03_merge_heads": None}, True,
                                ["Interrupting kernel", "CellTimeoutError"]),
    "h08_os_exit": ({"01_project": 3, "04_output_projection": None}, True, ["DeadKernelError: Kernel died"]),
    "h09_invalid_json": ({"01_project": 3, "02_split_heads": None}, True,
                         ["NotJSONError: Notebook does not appear to be JSON"]),
    "h10_huge_output": ({"01_project": 3}, False, []),
    "h11_monkeypatched_checks": ({"02_split_heads": 2}, False, []),
    "h99_honest_last": ({n: p for n, p in zip(kit.NOTEBOOKS, (3, 2, 2, 3, 5))}, False, []),
}


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    return kit.graded(tmp_path_factory.mktemp("grading"))["hostile"]


@pytest.fixture(scope="session")
def scores(hostile):
    return hostile.scores()


def total(cells: dict):
    values = [v for k, v in cells.items() if k != "needs_manual_grade"]
    return None if any(v is None for v in values) else sum(values)


def test_record_covers_the_catalogue():
    assert set(RECORD) == set(HOSTILE)


def test_the_batch_never_aborts(hostile, scores):
    """Every student is in the gradebook, the last one fully graded; failures are reported by exit status."""
    assert set(scores) == set(HOSTILE)
    assert hostile.returncodes["autograde"] == 1  # nbgrader's way of saying "some submissions failed"
    assert "Please see the the above traceback" in hostile.logs["autograde"]
    assert hostile.returncodes["feedback"] == 0 and hostile.returncodes["export"] == 0
    assert {r["student_id"] for r in hostile.grades_csv()} == set(HOSTILE)


@pytest.mark.parametrize("student", sorted(RECORD))
def test_recorded_score_and_reason(student, hostile, scores):
    points, failed, reasons = RECORD[student]
    got = {nb: total(cells) for nb, cells in scores[student].items() if nb in points}
    assert got == points
    others = {nb: total(cells) for nb, cells in scores[student].items() if nb not in points}
    assert set(others.values()) <= {0}, "a notebook that was not submitted scores 0"
    ungraded = [nb for nb, p in points.items() if p is None]
    assert all(scores[student][nb]["needs_manual_grade"] for nb in ungraded)
    log = hostile.student_log(student)
    assert (f"There was an error processing assignment 'mha' for student '{student}'" in log) is failed
    for reason in reasons:
        assert reason in log, f"{student}: the log does not say {reason!r}"
    # A failed submission loses its autograded folder, hence all its feedback (stock nbgrader).
    assert (hostile.course / "feedback" / student).exists() is not failed


def test_edited_tests_are_restored(hostile):
    nb = kit.read(hostile.course / "autograded" / "h01_edited_locked_cells" / kit.ASSIGNMENT / "02_split_heads.ipynb")
    text = json.dumps(nb)
    assert "what tests?" not in text and "print('edited')" not in text and "BEGIN HIDDEN TESTS" in text
    assert "reshape without transpose" in hostile.feedback("h01_edited_locked_cells", "02_split_heads")


@pytest.mark.parametrize("student, notebook", [("h02_deleted_test_cells", "02_split_heads"),
                                               ("h03_stripped_test_metadata", "03_merge_heads")])
def test_restored_cells_say_so_in_the_feedback(student, notebook, hostile):
    assert "was missing from the submission. It was added back by nbgrader." in hostile.feedback(student, notebook)


def test_a_stuck_cell_is_named_in_the_feedback(hostile):
    text = hostile.feedback("h06_infinite_loop", "02_split_heads")
    assert "CellTimeoutError" in text and "name 'split_heads' is not defined" in text


def test_a_100_mb_line_reaches_the_feedback(hostile):
    """LimitOutput caps lines, not bytes: stock nbgrader keeps the whole print (later work: cap it)."""
    autograded = hostile.course / "autograded" / "h10_huge_output" / kit.ASSIGNMENT / "01_project.ipynb"
    feedback = hostile.course / "feedback" / "h10_huge_output" / kit.ASSIGNMENT / "01_project.html"
    assert autograded.stat().st_size > 100_000_000 and feedback.stat().st_size > 90_000_000


def test_a_monkeypatched_check_wins_full_marks(hostile):
    """In-kernel tests are not tamper-proof (later work): a wrong split_heads plus a patch scores 2/2."""
    text = hostile.feedback("h11_monkeypatched_checks", "02_split_heads")
    assert "Mistake" not in text


def test_other_students_are_untouched(scores):
    for student in ("h00_honest_first", "h99_honest_last"):
        assert not any(c["needs_manual_grade"] for c in scores[student].values())
    assert total(scores["h99_honest_last"]["05_assembly"]) == 5
