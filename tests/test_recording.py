"""Recording in the coordinating process: grades are committed in batches, a notebook is stamped as
graded only once its batch is committed, and a failing batch commits nothing."""
import json
import time

import pytest
from nbgrader.api import Gradebook, MissingEntry

from mha_grader.trusted import course as course_mod, feedback, gradebook
from mha_grader.trusted.gradebook import GradebookWriter
from mha_grader.trusted.recording import Recorder
from submissions import kit

P = "01_project"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return kit.make_course(tmp_path_factory.mktemp("recording") / "course")


def _result(course_obj, score: float) -> dict:
    release = course_obj.releases[P]
    tests = [{"id": g.id, "points": g.points, "score": score * g.points, "message": "" if score else "wrong",
              "mistake": None if score else "wrong values"} for g in release.grade_cells]
    result = {"tests": tests, "notes": [], "status": "graded", "seconds": 0.1}
    result["feedback"] = feedback.render(release, None, result, "x")
    return result


def _booked(course, student: str) -> dict:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="") as gb:
        try:
            nb = gb.find_submission_notebook(P, "mha", student)
        except MissingEntry:
            return {}
        return {g.name: g.auto_score for g in nb.grades}


def test_grades_and_stamps_wait_for_the_batch_commit(course):
    course_obj = course_mod.Course(course)
    writer = GradebookWriter(course_obj.db_url, "mha")
    recorder = Recorder(course_obj, writer)
    recorder.last_flush += 3600  # no flush by time in this test
    for student, score in (("r1", 1.0), ("r2", 0.0)):
        recorder.record({"student": student, "notebook": P, "stamp": f"k-{student}"}, _result(course_obj, score))
    assert _booked(course, "r1") == {} and course_obj.stamps("r1") == {}  # queued, not committed
    recorder.settle()
    assert (course / "feedback" / "r1" / "mha" / f"{P}.html").is_file()  # the files are written before
    recorder.flush()
    full = {g.id: g.points for g in course_obj.releases[P].grade_cells}
    assert _booked(course, "r1") == full and _booked(course, "r2") == {g: 0.0 for g in full}
    assert course_obj.stamps("r1") == {P: "k-r1"} and course_obj.stamps("r2") == {P: "k-r2"}
    stored = json.loads((course / "autograded" / "r1" / "mha" / f"{P}.result.json").read_text())
    assert "feedback" not in stored  # the rendered pages are files, not part of the stored result
    recorder.close()
    writer.close()


def test_a_batch_that_fails_commits_nothing(course):
    course_obj = course_mod.Course(course)
    writer = GradebookWriter(course_obj.db_url, "mha")
    good = _result(course_obj, 1.0)["tests"]
    writer.record("r3", P, good)
    writer.record("r4", P, [{**good[0], "id": "no_such_test"}])
    with pytest.raises(MissingEntry, match="no_such_test"):
        writer.flush()
    writer.close()
    assert _booked(course, "r3") == {} and _booked(course, "r4") == {}


def _rows(course, student: str) -> list[tuple]:
    """Every row nbgrader keeps for ``student``'s submission, ids replaced by what they point at."""
    import sqlite3
    db = sqlite3.connect(course / "gradebook.db")
    joins = ("FROM submitted_assignment sa JOIN submitted_notebook sn ON sn.assignment_id = sa.id "
             "JOIN notebook n ON n.id = sn.notebook_id")
    found = db.execute(f"SELECT 'nb', n.name, sn.flagged, sn.late_submission_penalty, sa.timestamp, sa.extension {joins} "
                       "WHERE sa.student_id = ?", (student,)).fetchall()
    for table, columns in (("grade", "t.auto_score, t.manual_score, t.extra_credit, t.needs_manual_grade"),
                           ("comment", "t.auto_comment, t.manual_comment")):
        found += db.execute(f"SELECT '{table}', n.name, c.name, {columns} {joins} JOIN {table} t ON t.notebook_id = sn.id "
                            "JOIN base_cell c ON c.id = t.cell_id WHERE sa.student_id = ?", (student,)).fetchall()
    db.close()
    return sorted(found)


def test_a_new_submission_has_the_rows_nbgrader_would_make(course):
    """The bulk rows of a first submission are those of nbgrader's own add_submission, to the column."""
    course_obj = course_mod.Course(course)
    with Gradebook(course_obj.db_url, course_id="") as gb:
        gb.update_or_create_student("by_nbgrader")
        gb.add_submission("mha", "by_nbgrader")
    writer = GradebookWriter(course_obj.db_url, "mha")
    writer.record("by_us", P, [])  # a submission, no score yet
    writer.flush()
    writer.close()
    ours, theirs = _rows(course, "by_us"), _rows(course, "by_nbgrader")
    assert ours == theirs and len(ours) > len(kit.NOTEBOOKS)


def _ids(course, student: str) -> list[str]:
    """The ids of the rows made for ``student``'s submission: the submission, its notebooks, grades and comments."""
    import sqlite3
    db = sqlite3.connect(course / "gradebook.db")
    found = [i for (i,) in db.execute("SELECT id FROM submitted_assignment WHERE student_id = ?", (student,))]
    notebooks = [i for (i,) in db.execute("SELECT id FROM submitted_notebook WHERE assignment_id = ?", found)]
    for table in ("grade", "comment"):
        found += [i for n in notebooks for (i,) in db.execute(f"SELECT id FROM {table} WHERE notebook_id = ?", (n,))]
    db.close()
    return found + notebooks


def test_the_rows_of_a_later_batch_have_ids_that_sort_after(course):
    """The writer's row ids are nbgrader's form (32 hex digits: a UUID, here of version 7, the time first), and those
    of a later batch sort after every earlier one, so each batch's rows sit together at the end of every index that
    holds an id, whatever the size of the gradebook (uuid4's random ids spread a batch over the whole index)."""
    import time
    import uuid
    course_obj = course_mod.Course(course)
    writer = GradebookWriter(course_obj.db_url, "mha")
    for student in ("early", "late"):
        writer.record(student, P, [])
        writer.flush()
        time.sleep(0.01)
    writer.close()
    early, late = _ids(course, "early"), _ids(course, "late")
    assert len(early) == len(set(early)) > len(kit.NOTEBOOKS) and len(late) == len(early)
    assert all(len(i) == 32 and uuid.UUID(i).hex == i and uuid.UUID(i).version == 7 for i in early + late)
    assert max(early) < min(late)



def _polls(seconds: float) -> str:
    """A call that waits as a driver waits on a frozen server: asleep, waking every 0.1 s to look (psycopg's
    interval) and spending ~0.3 ms each time (twice psycopg's measured mean, about its worst second)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.1)
        spin = time.thread_time() + 0.0003
        while time.thread_time() < spin:
            pass
    return "answered"


def _works(seconds: float) -> str:
    """A call that keeps the CPU busy (a slow answer on a loaded machine), longer than a server may stay silent."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))
    return "answered"


def test_a_call_that_only_polls_is_given_up_on_and_one_that_works_is_waited_for(course):
    """A database thread that waits, however often its driver wakes to poll, is silent after ANSWER_S (the run
    ends within seconds); one that works past ANSWER_S is waited for, even when the first look at it comes after
    ANSWER_S (a run that was busy elsewhere)."""
    course_obj = course_mod.Course(course)
    polling, working = (GradebookWriter(course_obj.db_url, "mha") for _ in range(2))
    try:
        for writer in (polling, working):
            writer.patience = gradebook.ANSWER_S  # (a server's patience: the sqlite file's is longer)
        started = time.monotonic()
        with pytest.raises(gradebook.Silent):
            polling._answered(_polls, gradebook.ANSWER_S + 1)
        waited = time.monotonic() - started
        assert gradebook.ANSWER_S <= waited < gradebook.ANSWER_S + gradebook.PROGRESS_WINDOW_S + 0.5, waited
        asked = working._ask(_works, gradebook.ANSWER_S + 1)
        time.sleep(gradebook.ANSWER_S + 0.3)
        assert working._wait(asked, block=False) is None  # (looked at late: still working)
        assert working._wait(asked) == "answered"
    finally:
        time.sleep(1)  # (the polling call ends)
        polling.close()
        working.close()
