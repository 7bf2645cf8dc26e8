"""The course through nbgrader's whole round trip, as on JupyterHub, with `make grade` where autograde was.

Real Unix students (submissions/hub.py: made here, homes under a folder of the test, removed after) fetch
the release from nbgrader's own exchange, hand it in, and one hands in again; the instructor collects,
grades with `make grade`, exports, and releases the feedback, which each student fetches. The assignment has
a due date: alice hands in before it, bob after it, carol after it with an extension. The course's late
policy is each of nbgrader's settings in turn (no penalty, zero, a plugin of the course's own). Two students
of an LMS download come in through `nbgrader zip_collect` (nbgrader's documented file-name plugin), imported
with their lms_user_id. The same collected submissions of two students are graded by stock `nbgrader
autograde` too: the times, the lateness, the penalties and the exported columns must be the same.

One story, run once (the module's fixture, about 2-3 minutes on 2 busy cores); each test checks one part of it.
No real user's home is touched: the students' are under the hub's folder, and the instructor's commands get a
HOME there too.
"""
import csv
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from submissions import kit
from submissions.hub import Hub
from submissions.mutants import MUTANTS

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("unshare"),
                                 reason="real Unix students and the sandbox need root, useradd and unshare, as in CI"),
              pytest.mark.filterwarnings(  # nbgrader's own add_submission, under SQLAlchemy 2.1 (as in autograde)
                  "ignore:Object of type <Submitted.*not in session:sqlalchemy.exc.SAWarning")]
A = kit.ASSIGNMENT
EXCHANGE_STUDENTS, LMS_STUDENTS = ("alice", "bob", "carol"), ("dave", "erin")
WRONG_SPLIT = next(m for m in MUTANTS if m.student == "m06_split_no_transpose")
PER_SECOND = '''from nbgrader.plugins import BasePlugin


class PerSecond(BasePlugin):
    """The course's own late policy: a hundredth of a point per second late (as nbgrader's docs write a plugin)."""

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        return total_seconds_late / 100
'''
POLICIES = {"none": "", "zero": 'c.LateSubmissionPlugin.penalty_method = "zero"\n',
            "own": 'c.AssignLatePenalties.plugin_class = "late.PerSecond"\n'}
LMS_CONFIG = '''c.ZipCollectApp.strict = True
c.FileNameCollectorPlugin.named_regexp = r".*_(?P<student_id>\\w+)_attempt_(?P<timestamp>[0-9\\-]+)_(?P<file_id>.*)"
'''
LMS_TIMESTAMPS = '''from nbgrader.plugins import FileNameCollectorPlugin


class CustomPlugin(FileNameCollectorPlugin):
    """nbgrader's documented fix for LMS time stamps that dateutil misreads (2016-01-30-15-00-00)."""

    def collect(self, submission_file):
        info = super(CustomPlugin, self).collect(submission_file)
        if info is not None:
            info["timestamp"] = "{}-{}-{} {}:{}:{}".format(*tuple(info["timestamp"].split("-")))
        return info
'''


def make_grade(course: Path) -> subprocess.CompletedProcess:
    """`make grade` on ``course``, as typed (it exports grades.csv after grading)."""
    return subprocess.run(["make", "--no-print-directory", "-C", str(kit.REPO), "grade", f"COURSE={course}",
                           "ARGS=--workers 2"], env={**kit.env(), "MHA_GRADER_SECRET": str(course.parent / "secret")},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)


def ok(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 0, run.stdout[-3000:]
    return run.stdout


def policy(course: Path, exchange: str, name: str, extra: str = "") -> None:
    """The course's nbgrader_config.py: ours, the exchange's lines, and the late policy ``name``."""
    base = (kit.REPO / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(f"{base}\n{exchange}{POLICIES[name]}{extra}")


def gradebook(course: Path, students) -> dict:
    """{student: {"timestamp", "seconds_late", "extension", "penalties": {notebook: penalty}, "scores": {...}}}, read
    with nbgrader's own API."""
    from nbgrader.api import Gradebook
    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "mha") as gb:
        for student in students:
            sub = gb.find_submission(A, student)
            out[student] = {"timestamp": sub.timestamp, "seconds_late": sub.total_seconds_late,
                            "extension": sub.extension,
                            "penalties": {nb.name: nb.late_submission_penalty for nb in sub.notebooks},
                            "scores": {nb.name: nb.score for nb in sub.notebooks}}
    return out


def exported(path: Path) -> dict[str, dict]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(path.read_text()))}


def collected_time(course: Path, student: str) -> datetime.datetime:
    """The time nbgrader autograde reads from the student's timestamp.txt (CourseDirectory.get_existing_timestamp)."""
    from nbgrader.coursedir import CourseDirectory
    return CourseDirectory().get_existing_timestamp(str(course / "submitted" / student / A))


def submit(hub: Hub, name: str, notebooks: dict[str, dict], extra: dict[str, str] = {}) -> str:
    """The student's work written into their fetched assignment folder, then `nbgrader submit`; returns the time
    nbgrader wrote in the exchange (its timestamp.txt)."""
    folder = hub.home(name) / A
    for nb, content in notebooks.items():
        (folder / f"{nb}.ipynb").write_text(json.dumps(content, indent=1))
    for file, text in extra.items():
        (folder / file).write_text(text)
    hub.chown(folder)
    ok(hub.run_as(name, "nbgrader", "submit", A))
    inbound = hub.exchange / "mha" / "inbound"
    latest = max((p for p in inbound.iterdir() if p.name.startswith(hub.users[name] + "+")), key=lambda p: p.name)
    return (latest / "timestamp.txt").read_text()


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    from nbgrader.utils import parse_utc
    base = tmp_path_factory.mktemp("roundtrip")
    seen = SimpleNamespace()
    with Hub(list(EXCHANGE_STUDENTS), "mha") as hub, pytest.MonkeyPatch.context() as patch:
        instructor = hub.root / "instructor"  # the instructor's commands, this one's included, keep out of root's home
        instructor.mkdir(mode=0o700)
        patch.setenv("HOME", str(instructor))
        seen.users = hub.users
        config = f"c.CourseDirectory.course_id = 'mha'\nc.Exchange.root = {str(hub.exchange)!r}\n"
        course = kit.make_course(base / "course", config)
        ok(subprocess.run([sys.executable, "-m", "mha_grader", "secret"], env={**kit.grader_env(base / "secret")},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))  # (`make secret`, kept here)
        (course / "late.py").write_text(PER_SECOND)
        (course / "plugin.py").write_text(LMS_TIMESTAMPS)
        ok(kit.nbgrader(course, "release_assignment", A))
        for name in EXCHANGE_STUDENTS:
            ok(hub.run_as(name, "nbgrader", "fetch_assignment", A))
        full = {n: kit.filled(course, n) for n in kit.NOTEBOOKS}
        seen.written = {"alice": submit(hub, "alice", full, {"scratch.txt": "my notes\n"})}
        due = parse_utc(seen.written["alice"]) + datetime.timedelta(milliseconds=1)
        seen.due = due
        ok(kit.nbgrader(course, "db", "assignment", "add", A, f"--duedate={due.isoformat(' ')} UTC"))
        for name in ("bob", "carol"):
            seen.written[name] = submit(hub, name, full)
        _grant(course, hub.users["carol"], days=1)  # (the instructor, before grading: the submission, its extension)
        ok(kit.nbgrader(course, "collect", A))
        seen.collected = {name: collected_time(course, hub.users[name]) for name in EXCHANGE_STUDENTS}
        stock = base / "stock"  # the same collected work of two students, for stock autograde
        shutil.copytree(course, stock)
        shutil.rmtree(stock / "submitted" / hub.users["alice"])
        u = hub.users

        # late policy: none, then zero, then the course's own plugin (nothing to grade again: the policy is reapplied)
        seen.runs = {}
        for name in POLICIES:
            policy(course, config, name)
            seen.runs[name] = ok(make_grade(course))
            seen.__dict__[name] = SimpleNamespace(gradebook=gradebook(course, [u[s] for s in EXCHANGE_STUDENTS]),
                                                  grades=exported(course / "grades.csv"),
                                                  by_student={r["student"]: r for r in csv.DictReader(
                                                      (course / "grades_by_student.csv").open())})
        seen.notes = (course / "notes.csv").read_text()
        seen.report = kit.html_text(course / "class_report.html")

        # stock autograde on two of them, under the same policy
        shutil.copy(course / "nbgrader_config.py", stock)
        shutil.copy(course / "late.py", stock)
        seen.autograde = ok(kit.nbgrader(stock, "autograde", A))
        ok(kit.nbgrader(stock, "export", "--exporter=nbgrader.plugins.CsvExportPlugin", "--to=stock.csv"))
        seen.stock = SimpleNamespace(gradebook=gradebook(stock, [u["bob"], u["carol"]]),
                                     grades=exported(stock / "stock.csv"))

        # bob hands in again (a mistake in 02); two LMS students come in through zip_collect
        wrong = kit.filled(course, "02_split_heads", {"split_heads": WRONG_SPLIT.answer(
            kit.solution_cells("02_split_heads")["split_heads"])})
        seen.written["bob again"] = submit(hub, "bob", {**full, "02_split_heads": wrong})
        ok(kit.nbgrader(course, "collect", "--update", A))
        seen.lms = _lms_download(course, due, full)
        policy(course, config, "own", LMS_CONFIG)
        ok(kit.nbgrader(course, "db", "student", "import", str(course / "students.csv")))
        ok(kit.nbgrader(course, "zip_collect", "--collector=plugin.CustomPlugin", A))
        seen.runs["again"] = ok(make_grade(course))
        seen.again = SimpleNamespace(gradebook=gradebook(course, [*(u[s] for s in EXCHANGE_STUDENTS), *LMS_STUDENTS]),
                                     grades=exported(course / "grades.csv"))

        # feedback back to the students
        seen.release = kit.nbgrader(course, "release_feedback", A)
        seen.fetched = {}
        for name in EXCHANGE_STUDENTS:
            seen.__dict__[f"fetch_{name}"] = hub.run_as(name, "nbgrader", "fetch_feedback", A)
            root = hub.home(name) / A / "feedback"
            seen.fetched[name] = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.html")}
        seen.pages = {u[s]: {p.name: p.read_bytes() for p in (course / "feedback" / u[s] / A).glob("*.html")}
                      for s in EXCHANGE_STUDENTS}
        seen.course = course
        yield seen


def _grant(course: Path, student: str, days: int) -> None:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "mha") as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(A, student)
        gb.grant_extension(A, student, days=days)


def _lms_download(course: Path, due: datetime.datetime, full: dict) -> dict:
    """An LMS's download of two students' work, named as nbgrader's documentation names them, in
    downloaded/<assignment>/archive/ (dave a day early, erin a second or two late), and the class list with
    their LMS ids."""
    stamps = {"dave": due - datetime.timedelta(days=1),
              "erin": due.replace(microsecond=0) + datetime.timedelta(seconds=2)}
    archive = course / "downloaded" / A / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "lms_download.zip", "w") as zf:
        for student, at in stamps.items():
            for nb, content in full.items():
                zf.writestr(f"{A}_{student}_attempt_{at:%Y-%m-%d-%H-%M-%S}_{nb}.ipynb", json.dumps(content))
    (course / "students.csv").write_text("id,first_name,last_name,email,lms_user_id\n"
                                         "dave,Dave,Doe,dave@example.org,lms-1001\n"
                                         "erin,Erin,Roe,erin@example.org,lms-1002\n")
    return {s: at.replace(microsecond=0) for s, at in stamps.items()}


# --- the times and lateness, as autograde records them -------------------------------------------------------

def test_each_submission_is_recorded_at_the_time_nbgrader_wrote(story):
    from nbgrader.utils import parse_utc
    for name in EXCHANGE_STUDENTS:
        user = story.users[name]
        recorded = story.none.gradebook[user]["timestamp"]
        assert recorded == story.collected[name] == parse_utc(story.written[name]), (name, story.written[name])
        assert story.none.grades[user]["timestamp"] == str(recorded)
    late = {n: story.none.gradebook[story.users[n]]["seconds_late"] for n in EXCHANGE_STUDENTS}
    assert late["alice"] == 0 and late["bob"] > 0, late
    assert late["carol"] == 0 and story.none.gradebook[story.users["carol"]]["timestamp"] > story.due, "the extension"
    assert story.none.gradebook[story.users["carol"]]["extension"] == datetime.timedelta(days=1)


def test_no_penalty_zero_and_the_course_plugin_each_applied_per_notebook(story):
    bob, alice, carol = (story.users[n] for n in ("bob", "alice", "carol"))
    assert all(p is None for s in story.none.gradebook.values() for p in s["penalties"].values())
    assert float(story.none.grades[bob]["score"]) == float(story.none.grades[bob]["max_score"]) > 0
    # zero: bob's every notebook loses its whole score; the others keep theirs
    zero = story.zero.gradebook[bob]
    assert zero["penalties"] == zero["scores"] and all(v > 0 for v in zero["scores"].values())
    assert float(story.zero.grades[bob]["score"]) == 0.0
    for student in (alice, carol):
        assert float(story.zero.grades[student]["score"]) == float(story.zero.grades[student]["max_score"])
        assert float(story.zero.grades[student]["late_submission_penalty"]) == 0.0
    # the course's own plugin: a hundredth of a point per second late, per notebook
    own = story.own.gradebook[bob]
    assert all(p == pytest.approx(own["seconds_late"] / 100) for p in own["penalties"].values()), own
    assert all(p is None for p in story.own.gradebook[alice]["penalties"].values())


def test_the_class_tables_say_who_was_late_and_by_how_much(story):
    bob, alice = story.users["bob"], story.users["alice"]
    row = story.zero.by_student[bob]
    assert float(row["seconds_late"]) == pytest.approx(story.zero.gradebook[bob]["seconds_late"])
    assert float(row["late_penalty"]) == float(row["total"]) > 0 and float(row["score"]) == 0.0
    assert float(story.zero.by_student[alice]["seconds_late"]) == 0 and row["timestamp"]
    late_table = story.report.split("Late submissions", 1)[1]
    assert bob in late_table and alice not in late_table, late_table
    assert "1 late submission(s)" in story.runs["zero"] and bob in story.runs["zero"]


def test_collect_files_are_not_junk_and_other_files_still_are(story):
    assert "timestamp.txt" not in story.notes and "submission_secret.txt" not in story.notes, story.notes
    assert f"{story.users['alice']}: 1 item(s) handed in besides the notebooks were not read (1 other file): " \
           "scratch.txt" in story.notes


# --- the same with stock autograde -------------------------------------------------------------------------

def test_stock_autograde_records_the_same_times_lateness_penalties_and_columns(story):
    assert "seconds late" in story.autograde  # (it met a late one)
    for student, stock in story.stock.gradebook.items():
        ours = story.own.gradebook[student]
        for key in ("timestamp", "seconds_late", "extension", "penalties"):
            assert ours[key] == stock[key], (student, key, ours[key], stock[key])
        theirs = story.stock.grades[student]
        mine = {k: v for k, v in story.own.grades[student].items() if k != "lms_user_id"}
        assert list(mine) == list(theirs)
        scores_aside = {"raw_score", "score"}
        assert {k: v for k, v in mine.items() if k not in scores_aside} == \
            {k: v for k, v in theirs.items() if k not in scores_aside}, (student, mine, theirs)


# --- a resubmission, and an LMS download ---------------------------------------------------------------------

def test_a_resubmission_is_graded_on_its_new_bytes_and_its_new_time(story):
    from nbgrader.utils import parse_utc
    bob = story.users["bob"]
    again = story.again.gradebook[bob]
    assert again["timestamp"] == parse_utc(story.written["bob again"]) > story.own.gradebook[bob]["timestamp"]
    assert again["seconds_late"] > story.own.gradebook[bob]["seconds_late"]
    assert again["scores"]["02_split_heads"] < story.own.gradebook[bob]["scores"]["02_split_heads"]
    assert again["scores"]["01_project"] == story.own.gradebook[bob]["scores"]["01_project"]
    assert all(p == pytest.approx(min(again["scores"][nb], again["seconds_late"] / 100))
               for nb, p in again["penalties"].items()), again
    assert "This run graded 11 notebook(s)" in story.runs["again"]  # bob's 02 (the rest: the same bytes), the LMS's 10


def test_an_lms_download_is_graded_with_its_times_and_exported_with_the_lms_ids(story):
    grades = story.again.grades
    assert {s: grades[s]["lms_user_id"] for s in LMS_STUDENTS} == {"dave": "lms-1001", "erin": "lms-1002"}
    assert all(not grades[story.users[s]]["lms_user_id"] for s in EXCHANGE_STUDENTS)
    for student in LMS_STUDENTS:
        assert story.again.gradebook[student]["timestamp"] == story.lms[student]
    assert story.again.gradebook["dave"]["seconds_late"] == 0 and story.again.gradebook["erin"]["seconds_late"] > 0
    assert float(grades["dave"]["score"]) == float(grades["dave"]["max_score"])


# --- feedback back to the students -----------------------------------------------------------------------------

def test_release_feedback_works_and_each_student_fetches_exactly_their_own_pages(story):
    assert story.release.returncode == 0, story.release.stdout[-3000:]
    everyone = {page for pages in story.pages.values() for page in pages.values()}
    for name in EXCHANGE_STUDENTS:
        fetch = story.__dict__[f"fetch_{name}"]
        assert fetch.returncode == 0, fetch.stdout[-3000:]
        mine = story.pages[story.users[name]]
        got = story.fetched[name]
        assert len(mine) == len(kit.NOTEBOOKS) == len(got), (name, sorted(got))
        folders = {path.split("/")[0] for path in got}
        assert len(folders) == 1, (name, folders)  # one submission's pages: the latest one's
        assert {path.split("/")[1]: page for path, page in got.items()} == mine
        assert not (set(got.values()) & (everyone - set(mine.values())))
    bob_latest = story.written["bob again"]
    assert {p.split("/")[0] for p in story.fetched["bob"]} == {bob_latest}
