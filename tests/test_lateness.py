"""What autograde keeps, kept by the grader: nbgrader's collect files read as untrusted data, lateness and the
course's late-submission penalty as nbgrader computes them, feedback that release_feedback can release, the
export with lms_user_id. (The whole round trip with the real exchange and real students: test_roundtrip.py.)"""
import csv
import datetime
import io
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc

from mha_grader.trusted import collected, lateness
from mha_grader.trusted.course import Course
from mha_grader.trusted.export import CsvExportWithLmsId
from submissions import kit

pytestmark = pytest.mark.filterwarnings(  # nbgrader's own add_submission, under SQLAlchemy 2.1 (as in autograde)
    "ignore:Object of type <Submitted.*not in session:sqlalchemy.exc.SAWarning")
DUE = datetime.datetime(2026, 1, 10, 12, 0, 0)
OWN_PLUGIN = '''from nbgrader.plugins import BasePlugin


class PerSecond(BasePlugin):
    def late_submission_penalty(self, student_id, score, total_seconds_late):
        return total_seconds_late / 1000 - (1 if student_id == "negative" else 0)
'''
POLICIES = {"none": "", "zero": 'c.LateSubmissionPlugin.penalty_method = "zero"\n',
            "own": 'c.AssignLatePenalties.plugin_class = "late.PerSecond"\n'}


@pytest.fixture(autouse=True)
def venv_first(monkeypatch):
    """A new gradebook runs nbgrader's `alembic` from PATH."""
    monkeypatch.setenv("PATH", kit.env()["PATH"])


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A released course (copied by each test that changes it)."""
    return kit.make_course(tmp_path_factory.mktemp("lateness") / "course")


# --- timestamp.txt: nbgrader's time, or a reason; never a file opened for a zone, never a wait -------------------

HONEST = ["2026-11-28 13:00:00.123456 UTC",         # what `nbgrader submit` writes (Exchange.timezone UTC)
          "2026-11-28 13:00:00.123456 America/Los_Angeles",  # ... with a zone name
          "2026-11-28 14:00:00.5 CET", "2026-11-28 14:00:00 -0800", "2026-11-28 14:00:00 +01:00",
          "2026-11-28 14:00:00 UTC+01:00", "2026-11-28 14:00:00 Etc/GMT-1", "2026-11-28 05:00:00 PST",
          "2026-11-28 13:00:00",                    # what `nbgrader zip_collect` writes (isoformat(' '), UTC)
          "2026-11-28T13:00:00+01:00", "  2026-11-28 13:00:00 UTC\n"]


@pytest.mark.parametrize("text", HONEST)
def test_an_honest_timestamp_is_read_as_autograde_reads_it(text, tmp_path):
    (tmp_path / "timestamp.txt").write_text(text)
    read = collected.read_timestamp(tmp_path)
    assert not read.problem and read.at == CourseDirectory().get_existing_timestamp(str(tmp_path)) is not None


HOSTILE = {"a zone that is a file": "2026-11-28 13:00:00 /proc/kmsg",
           "a zone that climbs": "2026-11-28 13:00:00 ../../../etc/passwd",
           "a zone that is relative with dots": "2026-11-28 13:00:00 ./zone.tab",
           "not a time": "yesterday, honestly", "a year out of range": "99999-01-01 00:00:00",
           "an offset out of range": "2026-11-28 13:00:00 99999",
           "terminal escapes": "2026-11-28 13:00:00 \x1b[31mUTC", "not ASCII": "2026-11-28 13:00:00 ÜTC",
           "too long": "2026-11-28 13:00:00" + " " * 200 + "UTC", "four words": "2026-11-28 13:00:00 UTC now"}


@pytest.mark.parametrize("how", HOSTILE)
def test_a_forged_timestamp_is_refused_with_a_reason(how, tmp_path, monkeypatch):
    import dateutil.tz
    asked = []
    real = dateutil.tz.gettz
    monkeypatch.setattr(dateutil.tz, "gettz", lambda name=None: asked.append(name) or real(name))
    (tmp_path / "timestamp.txt").write_text(HOSTILE[how])
    read = collected.read_timestamp(tmp_path)
    assert read.at is None and read.problem.startswith("its timestamp.txt "), read
    assert not [n for n in asked if "/" in str(n) or "." in str(n)], asked  # no path reached dateutil's gettz


def test_a_timestamp_that_is_not_a_small_regular_file_is_never_followed_or_waited_on(tmp_path):
    cases = {"link": lambda p: p.symlink_to("/etc/hostname"), "fifo": lambda p: os.mkfifo(p),
             "folder": lambda p: p.mkdir(), "large": lambda p: p.write_text("2026-11-28 13:00:00" * 1000)}
    for name, make in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        make(folder / "timestamp.txt")
        read = collected.read_timestamp(folder)  # (a FIFO opened for reading without O_NONBLOCK would wait here)
        assert read.at is None and read.problem, (name, read)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "timestamp.txt").write_text("\n")
    assert collected.read_timestamp(tmp_path / "empty") == collected.Timestamp(None, "", b"\n")  # as autograde: none
    assert collected.read_timestamp(tmp_path) == collected.Timestamp()  # no file


def test_the_collect_files_are_not_reported_as_handed_in_besides_the_notebooks(released, tmp_path):
    course = shutil.copytree(released, tmp_path / "course")
    folder = course / "submitted" / "s1" / "mha"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-11-28 13:00:00 UTC")
    (folder / "submission_secret.txt").write_text("ab" * 64)
    (folder / "scratch.txt").write_text("mine")
    _, _, notes = Course(course).submission("s1")
    assert notes == ["1 item(s) handed in besides the notebooks were not read (1 other file): scratch.txt."]
    (folder / "scratch.txt").unlink()
    assert Course(course).submission("s1")[2] == []
    (folder / "submission_secret.txt").unlink()
    (folder / "submission_secret.txt").symlink_to("/etc/hostname")  # a link is never one of them
    assert "1 link" in Course(course).submission("s1")[2][0]


# --- lateness and penalties: nbgrader's own numbers ------------------------------------------------------------

SUBMISSIONS = {  # student: (handed in, extension, auto scores of n1's two tests and n2's one)
    "early": (DUE - datetime.timedelta(hours=1), None, (2, 1, 3)),
    "hour_late": (DUE + datetime.timedelta(hours=1), None, (2, 0, 3)),
    "extended": (DUE + datetime.timedelta(hours=5), datetime.timedelta(days=1), (2, 1, 0)),
    "month_late": (DUE + datetime.timedelta(days=30), None, (1, 1, 3)),
    "negative": (DUE + datetime.timedelta(seconds=10), None, (2, 1, 3)),
    "no_time": (None, None, (2, 1, 3)),
    "was_late": (DUE - datetime.timedelta(minutes=1), None, (2, 1, 3)),  # a penalty stored, now on time
}


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    """An empty gradebook made once (a new one runs nbgrader's alembic migrations: seconds), copied by each test."""
    path = tmp_path_factory.mktemp("gradebook") / "empty.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", kit.env()["PATH"])
        Gradebook(f"sqlite:///{path}").close()
    return path


def _gradebook(path: Path, empty: Path) -> str:
    shutil.copy(empty, path)
    url = f"sqlite:///{path}"
    with Gradebook(url) as gb:
        gb.add_assignment("mha", duedate=DUE)
        for nb, cells in {"n1": {"t1": 2, "t2": 1}, "n2": {"u1": 3}}.items():
            gb.add_notebook(nb, "mha")
            for cell, points in cells.items():
                gb.add_grade_cell(cell, nb, "mha", max_score=points, cell_type="code")
        for student, (at, extension, scores) in SUBMISSIONS.items():
            gb.add_student(student)
            gb.add_submission("mha", student, **({"timestamp": at} if at else {}))
            if extension:
                gb.find_submission("mha", student).extension = extension
            for (nb, cell), score in zip([("n1", "t1"), ("n1", "t2"), ("n2", "u1")], scores):
                gb.find_grade(cell, nb, "mha", student).auto_score = score
        gb.find_submission_notebook("n1", "mha", "was_late").late_submission_penalty = 2.0
        gb.db.commit()
    return url


def _penalties(url: str) -> dict:
    with Gradebook(url) as gb:
        return {(s, nb.name): nb.late_submission_penalty for s in SUBMISSIONS
                for nb in gb.find_submission("mha", s).notebooks}


@pytest.mark.parametrize("name", POLICIES)
def test_penalties_are_those_of_nbgrader_s_own_preprocessor(name, tmp_path, empty_gradebook):
    """The same gradebook, penalised by nbgrader's AssignLatePenalties notebook by notebook (as autograde does) and
    by the grader's one pass over the class: the same penalty for every notebook, under each policy."""
    (tmp_path / "nbgrader_config.py").write_text(f"c = get_config()\n{POLICIES[name]}")
    (tmp_path / "late.py").write_text(OWN_PLUGIN)
    ours, theirs = (_gradebook(tmp_path / f"{side}.db", empty_gradebook) for side in ("ours", "theirs"))
    penalties = lateness.load_penalties(tmp_path)
    with Gradebook(ours) as gb:
        standing = lateness.Lateness(penalties, {}, "mha").apply(gb.db)
        gb.db.commit()
    stock = AssignLatePenalties(config=penalties.config)
    for student in SUBMISSIONS:
        for nb in ("n1", "n2"):
            stock.preprocess(nbformat.v4.new_notebook(), {"nbgrader": {
                "notebook": nb, "assignment": "mha", "student": student, "db_url": theirs}})
    assert _penalties(ours) == _penalties(theirs)
    with Gradebook(theirs) as gb:
        assert {s: gb.find_submission("mha", s).total_seconds_late for s in SUBMISSIONS} == \
            {s: st.seconds_late for s, st in standing.students.items()}
    if name == "zero":
        assert _penalties(ours)[("hour_late", "n1")] == 2 and _penalties(ours)[("early", "n1")] is None
    if name == "own":  # bounded as nbgrader bounds it: at most the score, at least 0
        assert _penalties(ours)[("month_late", "n1")] == 2 and _penalties(ours)[("negative", "n1")] == 0


def test_a_time_read_replaces_the_gradebook_s_and_no_time_keeps_it(tmp_path, empty_gradebook):
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    url = _gradebook(tmp_path / "gb.db", empty_gradebook)
    read = {"early": DUE + datetime.timedelta(minutes=1), "hour_late": DUE - datetime.timedelta(seconds=1),
            "no_time": None}
    with Gradebook(url) as gb:
        standing = lateness.Lateness(lateness.load_penalties(tmp_path), read, "mha").apply(gb.db, list(read))
        gb.db.commit()
    assert set(standing.students) == set(read)
    with Gradebook(url) as gb:
        assert gb.find_submission("mha", "early").timestamp == read["early"]
        assert gb.find_submission("mha", "no_time").timestamp is None
        assert gb.find_submission_notebook("n1", "mha", "early").late_submission_penalty == 3  # now late: zero
        assert gb.find_submission_notebook("n1", "mha", "hour_late").late_submission_penalty is None
        assert gb.find_submission_notebook("n1", "mha", "month_late").late_submission_penalty is None  # not asked


def test_a_failing_plugin_is_named_and_records_no_penalty(tmp_path, empty_gradebook):
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\nc.AssignLatePenalties.plugin_class = "bad.Bad"\n')
    (tmp_path / "bad.py").write_text("from nbgrader.plugins import BasePlugin\n\nclass Bad(BasePlugin):\n"
                                     "    def late_submission_penalty(self, student_id, score, total_seconds_late):\n"
                                     "        if student_id == 'hour_late':\n            raise KeyError('oops')\n"
                                     "        return float('nan') if student_id == 'extended' else 'ten'\n")
    url = _gradebook(tmp_path / "gb.db", empty_gradebook)
    late = lateness.Lateness(lateness.load_penalties(tmp_path), {}, "mha")
    with Gradebook(url) as gb:
        late.apply(gb.db)
        gb.db.commit()
    assert {(s, nb) for s, nb, _ in late.problems} == {(s, nb) for s in ("hour_late", "month_late", "negative")
                                                       for nb in ("n1", "n2")}
    assert all(p is None for p in _penalties(url).values() if p != 2.0)


def test_a_plugin_that_cannot_be_loaded_stops_before_grading_with_one_sentence(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\nc.AssignLatePenalties.plugin_class = "nowhere.X"\n')
    with pytest.raises(lateness.BadConfig, match="late-submission plugin could not be loaded.*nowhere"):
        lateness.load_penalties(tmp_path)
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\nc.LateSubmissionPlugin.penalty_method = "half"\n')
    with pytest.raises(lateness.BadConfig, match="half"):
        lateness.load_penalties(tmp_path).plugin_inst.penalty_method


# --- feedback that release_feedback can release -------------------------------------------------------------------

def test_the_collect_files_go_beside_the_pages_and_a_missing_secret_is_replaced(tmp_path):
    submitted, feedback = tmp_path / "submitted", tmp_path / "feedback"
    submitted.mkdir(), feedback.mkdir()
    (submitted / "timestamp.txt").write_text("2026-11-28 13:00:00.1 UTC")
    (submitted / "submission_secret.txt").write_text("ab" * 64)
    stamp = collected.read_timestamp(submitted)
    assert collected.publish(submitted, stamp, [feedback, tmp_path / "absent"]) == ""
    assert (feedback / "timestamp.txt").read_text() == "2026-11-28 13:00:00.1 UTC"
    assert (feedback / "submission_secret.txt").read_text() == "ab" * 64
    assert not (tmp_path / "absent").exists()
    (submitted / "submission_secret.txt").unlink()  # an LMS download: a time, no secret
    assert collected.publish(submitted, stamp, [feedback]) == ""
    mine = (feedback / "submission_secret.txt").read_bytes()
    assert mine.startswith(b"mha-") and len(mine) > 100
    collected.publish(submitted, stamp, [feedback])
    assert (feedback / "submission_secret.txt").read_bytes() == mine  # the same one, not rewritten
    (submitted / "submission_secret.txt").mkdir()  # not usable: replaced too, and said
    assert "not usable" in collected.publish(submitted, stamp, [feedback])
    for name in ("timestamp.txt", "submission_secret.txt"):  # as generate_feedback leaves them
        assert (feedback / name).stat().st_mode & 0o777 == 0o644
    bare = tmp_path / "by_hand"
    bare.mkdir()
    (tmp_path / "fb2").mkdir()
    assert collected.publish(bare, collected.read_timestamp(bare), [tmp_path / "fb2"]) == ""
    assert list((tmp_path / "fb2").iterdir()) == []  # copied in by hand: nothing, as generate_feedback


# --- the export ----------------------------------------------------------------------------------------------

def test_the_export_has_nbgrader_s_columns_and_values_then_the_lms_id(tmp_path, empty_gradebook):
    from nbgrader.plugins import CsvExportPlugin
    url = _gradebook(tmp_path / "gb.db", empty_gradebook)
    with Gradebook(url) as gb:
        gb.update_or_create_student("early", lms_user_id="lms-7", first_name="Ann", last_name="Lee")
        gb.add_student("absent")
        for plugin, name in ((CsvExportPlugin, "stock.csv"), (CsvExportWithLmsId, "ours.csv")):
            plugin(to=str(tmp_path / name)).export(gb)
        gb.update_or_create_student("hour_late", last_name="=HYPERLINK(1)", first_name="Lee, Jr.")
        CsvExportWithLmsId(to=str(tmp_path / "names.csv")).export(gb)
    stock = list(csv.DictReader(io.StringIO((tmp_path / "stock.csv").read_text())))
    ours = list(csv.DictReader(io.StringIO((tmp_path / "ours.csv").read_text())))
    assert [{k: v for k, v in row.items() if k != "lms_user_id"} for row in ours] == stock
    assert list(ours[0]) == [*stock[0], "lms_user_id"]
    assert {row["student_id"]: row["lms_user_id"] for row in ours}["early"] == "lms-7"
    named = {row["student_id"]: row for row in csv.DictReader(io.StringIO((tmp_path / "names.csv").read_text()))}
    assert named["hour_late"]["last_name"] == "'=HYPERLINK(1)" and named["hour_late"]["first_name"] == "Lee, Jr."


# --- through the grading command -------------------------------------------------------------------------------

def test_a_forged_timestamp_stops_its_student_only_and_late_work_is_penalised(released, tmp_path):
    """Grading (its own code: no sandbox needed) a class with a late student under 'zero', and three whose
    timestamp.txt is no time (a zone that is a file, a link, a pipe): those three are named and not graded,
    the run ends with status 1, and the others are graded with their times."""
    course = shutil.copytree(released, tmp_path / "course")
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment("mha", duedate=DUE)
    work = {"03_merge_heads": kit.filled(course, "03_merge_heads")}
    for student, written in {"ontime": "2026-01-10 11:00:00 UTC", "late": "2026-01-10 13:00:00 Europe/Paris",
                             "future": "2999-01-01 00:00:00 UTC",
                             "zone": "2026-01-01 00:00:00 /proc/kmsg", "link": None, "pipe": None}.items():
        kit.submit(course, student, work)
        folder = course / "submitted" / student / "mha"
        if written:
            (folder / "timestamp.txt").write_text(written)
        (folder / "submission_secret.txt").write_text(student * 20)
    (course / "submitted/link/mha/timestamp.txt").symlink_to("/etc/hostname")
    os.mkfifo(course / "submitted/pipe/mha/timestamp.txt")
    run = kit.grade(course, "--unsafe-no-sandbox", "--notebook", "03_merge_heads", timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "This run graded 3 notebook(s). 3 could not be graded" in run.stdout
    refused = {"zone": "is not a time nbgrader can read", "link": "is a link", "pipe": "is not a regular file"}
    for student, why in refused.items():
        assert f"{student}/mha: its timestamp.txt {why}" in run.stdout, run.stdout
    notes = (course / "notes.csv").read_text()
    assert "zone: not graded: its timestamp.txt" in notes
    assert "future: timestamp.txt says 2999-01-01 00:00:00 UTC, later than now" in notes
    assert "ontime: 1 item" not in notes and "late: 1 item" not in notes  # (the link is still named as one)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        late = gb.find_submission("mha", "late")
        assert late.timestamp == parse_utc("2026-01-10 13:00:00 Europe/Paris") and late.total_seconds_late == 0
        ontime = gb.find_submission_notebook("03_merge_heads", "mha", "ontime")
        assert ontime.late_submission_penalty is None and ontime.score == 2
    (course / "submitted/late/mha/timestamp.txt").write_text("2026-01-10 14:00:00 UTC")  # handed in again, late
    kit.grade(course, "--unsafe-no-sandbox", "--notebook", "03_merge_heads", timeout=600)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        late = gb.find_submission_notebook("03_merge_heads", "mha", "late")
        assert late.late_submission_penalty == late.score == 2  # the time read anew; nothing graded again
    rows = {r["student"]: r for r in csv.DictReader((course / "grades_by_student.csv").open())}
    assert float(rows["late"]["seconds_late"]) == 7200 and float(rows["late"]["score"]) == 0
    assert (course / "feedback/late/mha/timestamp.txt").read_text() == "2026-01-10 14:00:00 UTC"
    assert (course / "feedback/ontime/mha/submission_secret.txt").read_text() == "ontime" * 20
    assert not (course / "feedback/zone/mha").exists()
