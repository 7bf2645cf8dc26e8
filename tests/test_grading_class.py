"""Grading a whole class: one worker, two workers, a PostgreSQL gradebook and a real Dask
scheduler with two workers (started on loopback by scripts/services.py) give the same grades and
messages; every student is graded exactly once; nothing is left running afterwards."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from submissions import classroom, kit

REPO = kit.REPO
STUDENTS = 8
NOTEBOOKS = kit.NOTEBOOKS[:4]  # 05 has no hidden cases yet (placeholder checks) and would only cost time

spec = importlib.util.spec_from_file_location("services", REPO / "scripts" / "services.py")
services = importlib.util.module_from_spec(spec)
spec.loader.exec_module(services)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """A released course with a generated class in it, and a course secret outside it."""
    base = tmp_path_factory.mktemp("class")
    course = kit.make_course(base / "course")
    made = classroom.generate(course, STUDENTS, NOTEBOOKS, complete=False)  # fewer sandbox runs: a faster test
    secret = base / "secret"
    secret.write_text("0123456789abcdef" * 4 + "\n")
    secret.chmod(0o600)
    _subreaper(True)  # a process a run leaves behind becomes this process's child: leftovers() sees it
    yield base, course, secret, made
    _subreaper(False)


def _subreaper(on: bool) -> None:
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def children() -> set[int]:
    """Running processes this test process parents: its own (the loopback services, a sandbox fork
    server an earlier test started here) and every orphan of a grading run (re-parented here)."""
    me = os.getpid()
    return services._running({p for p, (_, parent, _) in services._table().items() if parent == me})


def grade(klass, name: str, *options: str, db_url: str = "") -> tuple[Path, str]:
    """Grade a fresh copy of the course; returns (the copy, the command's output)."""
    base, course, secret, _ = klass
    copy = base / name
    shutil.copytree(course, copy)
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("MHA_GRADER_DB_URL", None)
    if db_url:  # the gradebook on the server gets the release's assignment, as `make release` would (nbgrader
        # needs a course id on PostgreSQL: its default "" is no row of its course table, a foreign key)
        released = kit.nbgrader(copy, "generate_assignment", kit.ASSIGNMENT, "--force", f"--db={db_url}",
                                f"--CourseDirectory.course_id={kit.ASSIGNMENT}")
        assert released.returncode == 0, released.stdout
    known = courses(db_url, prune=True) if db_url else []
    before = children()
    run = subprocess.run([sys.executable, "-m", "mha_grader", "--course", str(copy), "grade", *options,
                          *(["--db-url", db_url] if db_url else [])],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not children() - before, "a process started by the run outlived it"
    assert not db_url or courses(db_url) == known, "the grader added a row to nbgrader's course table"
    return copy, run.stdout + run.stderr


def outcome(course: Path, db_url: str = "") -> dict:
    """{student: {notebook: [(test, score in the gradebook, score, message, mistake)]}} and the notes."""
    from nbgrader.api import Gradebook
    out = {}
    with Gradebook(db_url or f"sqlite:///{course / 'gradebook.db'}", kit.ASSIGNMENT if db_url else "default_course") as gb:
        for submission in gb.assignment_submissions(kit.ASSIGNMENT):
            assert submission.student.id not in out, f"{submission.student.id} has two submissions"
            per_nb = out[submission.student.id] = {}
            for nb in submission.notebooks:
                stored = json.loads((course / "autograded" / submission.student.id / kit.ASSIGNMENT /
                                     f"{nb.name}.result.json").read_text())
                booked = {g.name: g.auto_score for g in nb.grades}
                assert len(booked) == len(nb.grades), "a test cell has two grades"
                per_nb[nb.name] = {"tests": [(t["id"], booked[t["id"]], t["score"], t["message"], t["mistake"])
                                             for t in stored["tests"]], "notes": stored["notes"]}
    return out


def courses(db_url: str, prune: bool = False) -> list[str]:
    """The ids in nbgrader's course table (read directly: opening a Gradebook would add its default);
    ``prune`` first deletes the courses no assignment is in (generate_assignment adds "default_course")."""
    from sqlalchemy import create_engine, text
    engine = create_engine(db_url)
    try:
        with engine.begin() as db:
            if prune:
                db.execute(text("DELETE FROM course WHERE id NOT IN (SELECT course_id FROM assignment)"))
            return sorted(row[0] for row in db.execute(text("SELECT id FROM course")))
    finally:
        engine.dispose()


def graded_once(course: Path, log: str, students: dict) -> None:
    """Every (student, notebook) was graded in this run, exactly once."""
    jobs = len(students) * len(kit.NOTEBOOKS)  # a notebook not handed in is graded too (zero, with a reason)
    assert re.search(rf"This run graded {jobs} notebook\(s\)\.", log), log[-3000:]
    for student in students:
        stamps = json.loads((course / "autograded" / student / kit.ASSIGNMENT / ".graded.json").read_text())
        assert sorted(stamps) == kit.NOTEBOOKS


@pytest.fixture(scope="module")
def loopback_services(tmp_path_factory):
    """PostgreSQL and a Dask scheduler with two workers, started by the project's script."""
    folder = tmp_path_factory.mktemp("services")
    script = [sys.executable, str(REPO / "scripts" / "services.py")]
    started = subprocess.run([*script, "start", str(folder), "--postgres", "--dask-workers", "2"],
                             capture_output=True, text=True, timeout=300)
    state = json.loads((folder / "services.json").read_text()) if (folder / "services.json").exists() else {}
    pids = set().union(*(services.processes(p["pid"]) for p in state.get("processes", [])))
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield json.loads(started.stdout)
    finally:
        stopped = subprocess.run([*script, "stop", str(folder)], capture_output=True, text=True, timeout=300)
        assert stopped.returncode == 0, stopped.stderr
        assert not services._running(pids), "a service process outlived `services.py stop`"
        assert all(not Path(f).exists() for f in state.get("folders", [])), "a data folder was left behind"


def test_class_grades_are_the_same_everywhere(klass, loopback_services):
    _, course, _, students = klass
    serial, log = grade(klass, "serial", "--workers", "1")
    graded_once(serial, log, students)
    expected = outcome(serial)
    assert sorted(expected) == sorted(students)
    assert len({json.dumps(v, sort_keys=True) for v in expected.values()}) > 3, "the class should differ"

    local, log = grade(klass, "local", "--workers", "2")
    graded_once(local, log, students)
    assert outcome(local) == expected

    db_url = loopback_services["db_url"]
    postgres, log = grade(klass, "postgres", "--workers", "2", db_url=db_url)
    graded_once(postgres, log, students)
    assert outcome(postgres, db_url) == expected

    dask, log = grade(klass, "dask", "--scheduler", loopback_services["scheduler"])
    graded_once(dask, log, students)
    assert outcome(dask) == expected
    # The same tables for the instructor, whichever way it ran.
    for table in ("grades_by_student.csv", "mistakes.csv", "tests.csv"):
        assert (dask / table).read_text() == (serial / table).read_text() == (postgres / table).read_text()


def test_a_second_run_grades_nothing_again(klass, loopback_services):
    """Resuming through the scheduler: what is graded stays, no job is submitted twice."""
    base = klass[0]
    dask = base / "dask"
    if not dask.exists():
        pytest.skip("needs the graded copy of test_class_grades_are_the_same_everywhere")
    env = {**kit.env(), "MHA_GRADER_SECRET": str(klass[2]), "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "mha_grader", "--course", str(dask), "grade",
                          "--scheduler", loopback_services["scheduler"]],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "This run graded 0 notebook(s)." in run.stdout


def test_services_stop_what_they_started_when_starting_fails(tmp_path, monkeypatch):
    """PostgreSQL is up when the Dask scheduler cannot start: the server is stopped and its data removed."""
    monkeypatch.setattr(services, "BIN", tmp_path / "no-such-venv")
    with pytest.raises(OSError):
        services.start(tmp_path / "state", postgres=True, dask_workers=2)
    state = json.loads((tmp_path / "state" / "services.json").read_text())
    assert [p["name"] for p in state["processes"]] == ["postgres"]
    assert not services._running({state["processes"][0]["pid"]}), "PostgreSQL outlived the failed start"
    assert all(not Path(f).exists() for f in state["folders"])
