"""A grading run meets what goes wrong on an instructor's machine: ctrl-C in a terminal, SIGTERM, a
second run on the same course, a full disk, the database stopped, a Dask worker at another version or
killed. Each time the run stops within seconds with one line that says what was graded and how to
resume (or, for a worker, loses nothing), leaves nothing running, and the rerun grades exactly the
rest. The slow students' answers spin (no module that sleeps is allowed), so a run never ends by
itself while a test acts. (Run as root: the sandbox's users and the tmpfs mount need it.)"""
import contextlib
import io
import csv
import fcntl
import importlib.util
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from submissions import kit

spec = importlib.util.spec_from_file_location("services", kit.REPO / "scripts" / "services.py")
services = importlib.util.module_from_spec(spec)
spec.loader.exec_module(services)

NOTEBOOKS = kit.NOTEBOOKS[:4]
FAST, SLOW = ["a_fast_0", "a_fast_1"], ["z_slow_0", "z_slow_1", "z_slow_2"]
JOBS = (len(FAST) + len(SLOW)) * len(kit.NOTEBOOKS)  # a notebook not handed in is a job too (a zero)
SPINS = "def split_heads(x, num_heads):\n    while True:\n        pass\n"
PATIENT = ["--workers", "2", "--test-seconds", "200", "--notebook-seconds", "250"]  # a slow job runs minutes
QUICK = ["--workers", "2", "--test-seconds", "2", "--notebook-seconds", "4"]  # the same jobs end in seconds


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course whose fast students come first and whose slow ones spin in split_heads."""
    base = tmp_path_factory.mktemp("faults")
    course = kit.make_course(base / "course")
    for student in FAST:
        kit.submit(course, student, {n: kit.filled(course, n) for n in NOTEBOOKS})
    for student in SLOW:
        kit.submit(course, student, {"02_split_heads": kit.filled(course, "02_split_heads",
                                                                  {"split_heads": SPINS})})
    return course


@pytest.fixture
def course(released, tmp_path):
    copy = tmp_path / "course"
    shutil.copytree(released, copy)
    return copy


def command(course: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "mha_grader", "--course", str(course), "grade", *options]


def env(course: Path) -> dict:
    secret = course.parent / "secret"
    if not secret.exists():
        secret.write_text("0123456789abcdef" * 4 + "\n")
        secret.chmod(0o600)
    return kit.grader_env(secret)


def run_notes(course: Path) -> list[str]:
    """The last run's notes, in full (the terminal counts them)."""
    with open(course / "notes.csv", encoding="utf-8") as fh:
        return [row["note"] for row in csv.DictReader(fh)]


def stamps(course: Path) -> dict[str, dict]:
    return {p.parts[-3]: json.loads(p.read_text()) for p in (course / "autograded").glob("*/mha/.graded.json")}


def graded(course: Path) -> int:
    return sum(len(s) for s in stamps(course).values())


def wait_for(condition, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def sandboxes() -> set[int]:
    """Running processes of a sandbox user (uid sandbox.UID_BASE + n) descended from this test process (a
    run's orphans are re-parented here: see ``subreaper``), not another grader's on the same machine."""
    from mha_grader.walls.sandbox import SLOTS, UID_BASE
    table = _processes()
    ours = _descendants(table)
    return {pid for pid in ours if UID_BASE <= table[pid][1] < UID_BASE + SLOTS and table[pid][2] != "Z"}


def _processes() -> dict[int, tuple[int, int, str]]:
    """{pid: (parent pid, uid, state)} of every process of this machine."""
    table = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            table[int(entry.name)] = (int(stat[stat.rindex(")") + 2:].split()[1]), entry.stat().st_uid,
                                      stat[stat.rindex(")") + 2])
        except (OSError, ValueError):
            continue
    return table


def _descendants(table: dict) -> set[int]:
    """This test process's descendants in ``table`` (itself included)."""
    ours, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, (parent, _, _) in table.items() if parent in ours} - ours
        ours |= more
        grew = bool(more)
    return ours


def slow_job_running(course: Path) -> bool:
    """The fast students are graded and a job runs: a slow student's (the probe's sandboxes, before grading
    begins, are not one)."""
    return graded(course) >= len(FAST) * len(kit.NOTEBOOKS) and bool(sandboxes())


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    """A process a run leaves behind becomes this process's child, where sandboxes() sees it."""
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    assert prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    yield
    prctl(36, 0, 0, 0, 0)
    for pid in sandboxes() | graders():  # a failed test's run ends here, not in the next file's checks
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def graders() -> set[int]:
    """Grading runs (python -m mha_grader) descended from this test process."""
    found = set()
    for pid in _descendants(_processes()) - {os.getpid()}:
        try:
            if b"\0mha_grader\0" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            continue
    return found


def stop_line(output: str) -> re.Match:
    lines = [line for line in output.splitlines() if "Resume with:" in line]
    assert len(lines) == 1, output[-3000:]
    found = re.search(r"graded and recorded (\d+) of (\d+) notebook", lines[0])
    assert found, lines[0]
    return found


def rerun_grades_the_rest(course: Path, before: int, *options: str) -> None:
    """The rerun grades exactly what the stopped run did not, and nothing twice."""
    run = subprocess.run(command(course, *QUICK, *options), env=env(course), capture_output=True, text=True,
                         timeout=600)
    assert run.returncode in (0, 1), run.stdout + run.stderr  # the sleepers' timeouts are grades, not failures
    assert f"This run graded {JOBS - before} notebook(s)" in run.stdout, run.stdout[-3000:]
    assert graded(course) == JOBS
    assert all(len(kit.scores(course)[s]) == len(kit.NOTEBOOKS) for s in FAST + SLOW)


@pytest.mark.parametrize("backend", [[], ["--scheduler", "local"]], ids=["threads", "dask-local"])
def test_ctrl_c_in_a_terminal_stops_within_seconds_and_the_rerun_finishes(course, backend):
    """ctrl-C typed twice in a pseudo-terminal while sandboxes spin: one line, no traceback (none from
    the Dask workers either: the terminal's signal is the run's alone)."""
    main, terminal = pty.openpty()

    def controlling_terminal():  # as a shell does: the terminal's foreground job
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(command(course, *PATIENT, *backend), env=env(course), stdin=terminal, stdout=terminal,
                            stderr=terminal, start_new_session=True, preexec_fn=controlling_terminal)
    os.close(terminal)
    output = bytearray()
    reader = threading.Thread(target=_drain, args=(main, output), daemon=True)
    reader.start()
    wait_for(lambda: graded(course) >= len(FAST) * len(kit.NOTEBOOKS) and len(sandboxes()) >= 2,
             "the fast students to be graded while two slow ones run")
    os.write(main, b"\x03")  # what the terminal sends for ctrl-C: SIGINT to the foreground process group
    pressed = time.monotonic()
    time.sleep(0.3)
    os.write(main, b"\x03")
    proc.wait(timeout=60)
    stopped_in = time.monotonic() - pressed
    reader.join(timeout=10)
    os.close(main)
    text = output.decode(errors="replace")
    assert proc.returncode == 128 + signal.SIGINT, text[-3000:]
    assert stopped_in < 20, f"stopped {stopped_in:.1f} s after ctrl-C while the spinning jobs had minutes to go"
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    found = stop_line(text)
    assert int(found.group(1)) == graded(course) < JOBS and int(found.group(2)) == JOBS
    assert not sandboxes(), "a sandbox outlived the run"
    if not backend:  # (the rerun is the same either way)
        rerun_grades_the_rest(course, graded(course))


def _drain(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        into += chunk


def test_one_run_at_a_time_sigterm_and_a_stale_lock(course):
    first = subprocess.Popen(command(course, *PATIENT[2:], "--workers", "1"), env=env(course),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: slow_job_running(course), "the first run's slow job")
    second = subprocess.run(command(course, *QUICK), env=env(course), capture_output=True, text=True, timeout=120)
    assert second.returncode == 4, second.stdout + second.stderr
    assert f"process {first.pid} on" in second.stderr and "Another grading run holds this course" in second.stderr
    assert "Traceback" not in second.stderr

    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Stopped by SIGTERM" in err and "Traceback" not in err
    assert int(stop_line(err).group(1)) == graded(course)
    assert not sandboxes(), "a sandbox outlived the run"

    # A run that died without a word (SIGKILL) leaves its name in the lock file, not the lock itself.
    (course / ".grading.lock").write_text(json.dumps({"pid": 999999999, "host": "gone", "started": 0,
                                                      "command": "grade"}))
    before = graded(course)
    run = subprocess.Popen(command(course, *QUICK), env=env(course), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    wait_for(lambda: graded(course) > before, "the run to have planned and graded a notebook")
    resubmitted = course / "submitted" / SLOW[-1] / "mha" / "02_split_heads.ipynb"
    resubmitted.write_text(json.dumps(kit.filled(course, "02_split_heads")))  # handed in again, during the run
    out, err = run.communicate(timeout=600)
    assert "Took over the lock of a grading run that ended" in err and "process 999999999" in err
    assert f"This run graded {JOBS - before} notebook(s)" in out, out[-3000:]
    assert f"{SLOW[-1]}/02_split_heads: changed during the run; the next run grades it" in run_notes(course)
    assert (course / ".grading.lock").read_text() == "", "a finished run leaves the lock free and empty"
    again = subprocess.run(command(course, *QUICK), env=env(course), capture_output=True, text=True, timeout=600)
    assert "This run graded 1 notebook(s)" in again.stdout, again.stdout[-3000:]
    assert kit.scores(course)[SLOW[-1]]["02_split_heads"] == kit.max_scores(course)["02_split_heads"] | {
        "needs_manual_grade": False}


def test_deleted_edited_and_extra_test_cells_are_flagged(released):
    """What the README promises: graded from the release's cells, with a note (the class table's `flagged`)."""
    from mha_grader.trusted import notebooks
    from submissions.hostile import HOSTILE
    releases = notebooks.load_release(released / "exercises" / kit.ASSIGNMENT)
    says = {"h01_edited_locked_cells": "Read-only cells edited", "h02_deleted_test_cells": "Test cells deleted",
            "h04_schema_and_extra_grade_cells": "Extra or repeated test cells"}
    for hostile in (h for h in HOSTILE if h.student in says):
        for name, nb in hostile.build(released).items():
            notes = notebooks.program(releases[name], nb).notes
            assert any(n.startswith(says[hostile.student]) for n in notes), (hostile.student, notes)
    for name in NOTEBOOKS:
        assert notebooks.program(releases[name], kit.filled(released, name)).notes == []


@pytest.fixture
def small_disk(course):
    """The course's feedback folder on a tmpfs with room for a few pages only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = course / "feedback"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], check=True)
    try:
        free = shutil.disk_usage(folder).free
        with open(folder / "ballast", "wb") as fh:  # leaves about 120 kB: a few notebooks' pages
            fh.write(b"\0" * max(0, free - 120_000))
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_stops_the_run_with_one_sentence(course, small_disk):
    start = time.monotonic()
    run = subprocess.run(command(course, *QUICK), env=env(course), capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    assert run.returncode == 5, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert f"the disk that holds {small_disk}" in run.stderr and "is full" in run.stderr, run.stderr[-2000:]
    found = stop_line(run.stderr)
    assert int(found.group(1)) == graded(course) < JOBS
    pages = {p.parent.parent.name + "/" + p.stem for p in small_disk.glob("*/mha/*.html")}
    assert pages == {f"{s}/{n}" for s, names in stamps(course).items() for n in names}, "a page cut short was kept"
    assert took < 60, f"the run went on for {took:.0f} s after the disk was full"
    assert not sandboxes()
    (small_disk / "ballast").unlink()
    rerun_grades_the_rest(course, graded(course))


def test_the_database_stopped_mid_run_stops_the_run_with_one_sentence(course, tmp_path):
    """PostgreSQL (scripts/services.py, loopback) stops while notebooks are still being graded, then
    comes back (same data): the rerun grades the rest."""
    folder = tmp_path / "services"
    script = [sys.executable, str(kit.REPO / "scripts" / "services.py")]
    started = subprocess.run([*script, "start", str(folder), "--postgres"], capture_output=True, text=True,
                             timeout=300)
    again = None
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        state = json.loads(started.stdout)
        db_url = state["db_url"]
        released = kit.nbgrader(course, "generate_assignment", kit.ASSIGNMENT, "--force", f"--db={db_url}",
                                f"--CourseDirectory.course_id={kit.ASSIGNMENT}")
        assert released.returncode == 0, released.stdout
        run = subprocess.Popen(command(course, *QUICK, "--db-url", db_url), env=env(course),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: graded(course) >= len(FAST) * len(kit.NOTEBOOKS), "the fast students' grades")
        postgres = state["processes"][0]["pid"]
        server = (Path(f"/proc/{postgres}/cmdline").read_bytes().decode().split("\0")[:-1],
                  os.readlink(f"/proc/{postgres}/cwd"))
        os.kill(postgres, signal.SIGINT)  # PostgreSQL's fast shutdown: every connection is closed
        stopped = time.monotonic()
        out, err = run.communicate(timeout=300)
        took = time.monotonic() - stopped
        assert run.returncode == 5, out + err
        assert "Traceback" not in err and "rollback" not in err.lower(), err[-3000:]
        assert "the gradebook database postgresql+psycopg://grader:***@127.0.0.1" in err, err[-3000:]
        assert "is unreachable or refused the write" in err
        found = stop_line(err)
        assert int(found.group(1)) == graded(course) < JOBS
        assert took < 30, f"the run went on for {took:.0f} s after the database stopped"
        assert not sandboxes()

        while services.processes(postgres):
            time.sleep(0.1)
        again = restart(*server)
        wait_for(lambda: reachable(db_url), "PostgreSQL to be back")
        rerun = subprocess.run(command(course, *QUICK, "--db-url", db_url), env=env(course), capture_output=True,
                               text=True, timeout=600)
        assert f"This run graded {JOBS - int(found.group(1))} notebook(s)" in rerun.stdout, rerun.stdout[-3000:]
        assert graded(course) == JOBS
    finally:
        if again is not None:
            again.send_signal(signal.SIGINT)
            again.wait(timeout=60)
        subprocess.run([*script, "stop", str(folder)], capture_output=True, timeout=300)


def restart(command: list[str], cwd: str) -> subprocess.Popen:
    """PostgreSQL again, on its data folder, as scripts/services.py started it."""
    return subprocess.Popen([*services._unprivileged(Path(cwd)), *command], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def reachable(db_url: str) -> bool:
    from sqlalchemy import create_engine, text
    engine = create_engine(db_url)
    try:
        with engine.connect() as db:
            return db.execute(text("SELECT 1")).scalar() == 1
    except Exception:  # noqa: BLE001 - not yet
        return False
    finally:
        engine.dispose()


@contextlib.contextmanager
def dask_on_loopback(folder: Path, workers: int):
    """A Dask scheduler and ``workers`` workers started by scripts/services.py, stopped by it on leaving."""
    script = [sys.executable, str(kit.REPO / "scripts" / "services.py")]
    started = subprocess.run([*script, "start", str(folder), "--dask-workers", str(workers)], capture_output=True,
                             text=True, timeout=300)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield json.loads(started.stdout)
    finally:
        subprocess.run([*script, "stop", str(folder)], capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def dask_services(tmp_path_factory):
    """A Dask scheduler and two workers on loopback, shared by the module's tests."""
    with dask_on_loopback(tmp_path_factory.mktemp("dask"), 2) as services:
        yield services


def other_version_worker(scheduler: str, folder: Path) -> subprocess.Popen:
    """A worker joined to ``scheduler`` from a copy of the grader with one message changed (another version)."""
    other = folder / "other-clone"
    for package in ("mha_checks", "mha_grader"):
        shutil.copytree(kit.REPO / package, other / package, ignore=shutil.ignore_patterns("__pycache__"))
    judging = other / "mha_grader" / "trusted" / "judging.py"
    judging.write_text(judging.read_text().replace("Not graded: the file", "Not graded (other version): the file"))
    with open(folder / "other-worker.log", "w") as log:
        return subprocess.Popen([str(kit.BIN / "dask"), "worker", scheduler, "--host", "127.0.0.1",
                                 "--nthreads", "1", "--no-dashboard", "--name", "other-version",
                                 "--preload", "mha_grader.trusted.cluster"], cwd=other, stdout=log, stderr=log,
                                env={**kit.env(), "PYTHONPATH": str(other)}, start_new_session=True)


def wait_for_workers(scheduler: str, n: int) -> None:
    from distributed import Client
    with Client(scheduler, timeout="30s") as client:
        client.wait_for_workers(n, timeout=120)


def test_a_worker_at_another_version_takes_no_job(course, dask_services, tmp_path):
    """A third worker runs a copy of the grader with one message changed: it is named, and used for nothing."""
    worker = other_version_worker(dask_services["scheduler"], tmp_path)
    try:
        wait_for_workers(dask_services["scheduler"], 3)
        students = [option for s in FAST for option in ("--student", s)]
        run = subprocess.run(command(course, "--scheduler", dask_services["scheduler"], *students), env=env(course),
                             capture_output=True, text=True, timeout=600)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    refusals = [note for note in run_notes(course) if "takes no job: its grader is not this one" in note]
    assert len(refusals) == 1 and "mha_grader/trusted/judging.py differs" in refusals[0], run.stdout[-3000:]
    assert f"This run graded {len(FAST) * len(kit.NOTEBOOKS)} notebook(s)" in run.stdout
    results = [p.read_text() for p in (course / "autograded").glob("*/mha/*.result.json")]
    assert len(results) == len(FAST) * len(kit.NOTEBOOKS)
    assert not any("other version" in text for text in results), "a job ran on the worker at another version"


def test_a_worker_killed_mid_run_costs_nothing(course, dask_services):
    """One of two workers (its nanny with it) is killed while it runs a job: every notebook is still graded."""
    run = subprocess.Popen(command(course, *QUICK[2:], "--scheduler", dask_services["scheduler"]), env=env(course),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: graded(course) >= 3 and sandboxes(), "a few grades and a running job")
    victim = next(p for p in dask_services["processes"] if p["name"] == "dask-worker-0")
    os.killpg(victim["pid"], signal.SIGKILL)
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, out[-3000:] + err[-3000:]
    assert "could not be graded" not in out and "NoneType" not in out + err
    assert f"This run graded {JOBS} notebook(s)" in out, out[-3000:]
    assert graded(course) == JOBS


@pytest.mark.parametrize("unsafe", [False, True], ids=["sandboxed", "unsafe-no-sandbox"])
def test_end_all_ends_a_running_job_at_once_and_refuses_new_ones(unsafe):
    """What a stopping run calls: the job (and what it started) ends now, not at its time limit."""
    from mha_grader.walls import sandbox
    job = {"torch": False, "cells": [{"label": "spin", "source": "while True:\n    pass\n"}],
           "tests": [{"id": "t", "cases": []}]}
    done = {}
    runner = threading.Thread(target=lambda: done.update(report=sandbox.run(job, sandbox.Limits(60, 60, 90), unsafe)))
    sandbox.accept_new()
    runner.start()
    wait_for(lambda: sandbox._RUNNING, "the job to start", timeout=60)
    time.sleep(0.5)
    ended = time.monotonic()
    assert sandbox.end_all() == 1
    runner.join(timeout=30)
    assert not runner.is_alive() and time.monotonic() - ended < 10, "the job ran on after end_all"
    with pytest.raises(sandbox.Ended):
        sandbox.run(job, sandbox.Limits(), unsafe)
    sandbox.accept_new()


# --- every fault ends the run within seconds, in one sentence that names it and what to do ---------------

FAULT_S = 10  # a fault ends the run within this long (issue 28); each test prints what it measured
SAID = ("mha_grader: ", "grading", "Dask: ", "Dask worker ", "Grading stopped: ", "Grading did not start: ",
        "Stopped by ", "Took over the lock", "Another grading run holds",
        "The last results were not recorded: ")  # the only lines a run prints on stderr (the last: a stop came
# while a batch waited for a database that no longer answers; the stop line counts those notebooks as not recorded)


def ends_in_one_sentence(proc: subprocess.Popen, fault_at: float, status: int, what: str) -> tuple[str, str]:
    """The run's (stdout, stderr) once it ended with ``status`` within FAULT_S of the fault, saying ``what``
    in its one stop line, with no traceback and nothing else on stderr."""
    out, err = proc.communicate(timeout=300)
    took = time.monotonic() - fault_at
    print(f"ended {took:.1f} s after the fault, exit status {proc.returncode}")
    assert proc.returncode == status, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err and "Exception" not in err, err[-3000:]
    assert all(line.startswith(SAID) for line in err.splitlines() if line.strip()), err[-3000:]
    line = next((line for line in err.splitlines() if what in line), None)
    assert line and "Resume with: " in line, err[-3000:]
    assert took < FAULT_S, f"the run ended {took:.1f} s after the fault"
    return out, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_while_the_grader_loads_ends_in_one_line(course, sig):
    proc = subprocess.Popen(command(course, *QUICK), env=env(course), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert "loading the grader" in proc.stderr.readline()  # (the imports that follow take seconds)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    name = "ctrl-C (SIGINT)" if sig == signal.SIGINT else "SIGTERM"
    assert (f"Stopped by {name} while loading the grader; nothing was graded. Run again with: "
            f"{shlex.join(command(course, *QUICK))}") in err, err
    assert not (course / "autograded").exists()


@pytest.fixture
def read_only(course):
    """The course folder mounted read-only over itself (as root, a mode of 555 would not stop a write)."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    subprocess.run(["mount", "--bind", str(course), str(course)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(course)], check=True)
        yield course
    finally:
        subprocess.run(["umount", str(course)], check=True)


def test_a_read_only_course_folder_stops_before_grading(read_only):
    course = read_only
    run = subprocess.run(command(course, *QUICK), env=env(course), capture_output=True, text=True, timeout=300)
    assert run.returncode == 5, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert (f"Grading did not start: The course folder {course} cannot be written (Read-only file system): grading "
            "writes the gradebook, feedback/ and autograded/ there. Make it writable") in run.stderr, run.stderr
    assert f"then run again: {shlex.join(command(course, *QUICK))}" in run.stderr
    assert not (course / "autograded").exists()
    subprocess.run(["mount", "-o", "remount,bind,rw", str(course)], check=True)  # made writable, as it says
    rerun_grades_the_rest(course, 0)


@pytest.fixture
def full_disk(course, tmp_path):
    """A copy of the course on a tmpfs filled to the last byte."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        shutil.copytree(course, mount / "course")
        env(mount / "course")  # (its secret, beside it)
        with open(mount / "ballast", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        yield mount / "course"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_before_the_run_stops_it_in_one_sentence_and_the_rerun_grades_all(full_disk):
    course = full_disk
    run = subprocess.run(command(course, *QUICK), env=env(course), capture_output=True, text=True, timeout=300)
    assert run.returncode == 5, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert f"Grading did not start: The disk that holds the course folder {course} is full" in run.stderr, run.stderr
    assert "Free some space on it, then run again: " in run.stderr
    (course.parent / "ballast").unlink()
    rerun_grades_the_rest(course, 0)


def test_deleting_the_lock_note_does_not_free_the_course(course, tmp_path):
    """The lock is the course folder's own: its note deleted, or the folder reached through a link, a second
    run is still refused. The note is private and holds no password."""
    first = subprocess.Popen(command(course, *PATIENT[2:], "--workers", "1"), env=env(course),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: slow_job_running(course), "the first run's slow job")
    note = course / ".grading.lock"
    assert note.stat().st_mode & 0o777 == 0o600 and f'"pid": {first.pid}' in note.read_text()
    note.unlink()
    (tmp_path / "alias").symlink_to(course)
    for where in (course, tmp_path / "alias"):
        second = subprocess.run(command(where, *QUICK), env=env(course), capture_output=True, text=True, timeout=300)
        assert second.returncode == 4, second.stdout + second.stderr
        assert ("Another grading run holds this course" in second.stderr
                and "note (.grading.lock) is missing, empty or was deleted" in second.stderr), second.stderr
        assert "Traceback" not in second.stderr
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGTERM, err[-3000:]
    rerun_grades_the_rest(course, graded(course))


def test_the_resume_hint_is_the_command_typed_without_passwords(monkeypatch):
    from mha_grader.trusted import resume
    url = "postgresql+psycopg://grader:hunter2@127.0.0.1:5432/gradebook"
    typed = ["/venv/bin/python", "-m", "mha_grader", "--course", "/courses/mha", "grade", "--db-url", url, "--force"]
    monkeypatch.setattr(sys, "orig_argv", typed)
    monkeypatch.setattr(sys, "executable", typed[0])
    monkeypatch.delenv(resume.MAKE, raising=False)
    hint = resume.command()
    assert hint.startswith(shlex.join(typed).replace("hunter2", "***") + "  (the database password is not shown")
    assert "hunter2" not in hint and "hunter2" not in resume.command(force=False)
    assert "--force" not in resume.command(force=False)
    monkeypatch.setattr(sys, "orig_argv", typed[:6] + ["--student", "a b"])
    monkeypatch.setenv(resume.MAKE, "/repo")
    monkeypatch.setenv(resume.MAKE_FROM, "/repo")
    assert resume.command() == "make grade COURSE=/courses/mha ARGS='--student '\"'\"'a b'\"'\"''"
    monkeypatch.setattr(sys, "orig_argv", typed[:6] + ["--db-url", url])
    hint = resume.command()
    assert hint.startswith("make grade COURSE=/courses/mha ARGS='--db-url postgresql+psycopg://grader:***@")
    assert "hunter2" not in hint
    monkeypatch.setenv(resume.MAKE_FROM, "/elsewhere")
    monkeypatch.setattr(sys, "orig_argv", typed[:3] + ["--course", "/repo", "grade"])
    assert resume.command() == "make -C /repo grade"
    assert resume.hide_passwords("a sqlite:////tmp/x:y@z b postgresql://u@h/db") == \
        "a sqlite:////tmp/x:y@z b postgresql://u@h/db"


@pytest.fixture
def postgres(tmp_path):
    """A PostgreSQL server on loopback (scripts/services.py), woken before it is stopped."""
    folder = tmp_path / "services"
    script = [sys.executable, str(kit.REPO / "scripts" / "services.py")]
    started = subprocess.run([*script, "start", str(folder), "--postgres"], capture_output=True, text=True,
                             timeout=300)
    state = json.loads(started.stdout) if started.returncode == 0 else {}
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield state
    finally:
        for pid in services.processes(state["processes"][0]["pid"]) if state else ():
            os.kill(pid, signal.SIGCONT)
        subprocess.run([*script, "stop", str(folder)], capture_output=True, timeout=300)


@pytest.mark.parametrize("ctrl_c", [False, True], ids=["waited-for", "ctrl-c"])
def test_a_frozen_database_ends_the_run_in_one_sentence(course, postgres, ctrl_c):
    """Every PostgreSQL process stopped (SIGSTOP: connections accepted, nothing answered) while slow jobs run:
    the run finds it within seconds (and ctrl-C is honoured while it waits for the database), says so without
    the password, and the rerun, once the server is back, grades exactly the rest."""
    from sqlalchemy.engine import make_url
    db_url = postgres["db_url"]
    password = make_url(db_url).password
    released = kit.nbgrader(course, "generate_assignment", kit.ASSIGNMENT, "--force", f"--db={db_url}",
                            f"--CourseDirectory.course_id={kit.ASSIGNMENT}")
    assert released.returncode == 0, released.stdout
    run = subprocess.Popen(command(course, *PATIENT, "--db-url", db_url), env=env(course), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    wait_for(lambda: graded(course) >= len(FAST) * len(kit.NOTEBOOKS) and len(sandboxes()) >= 2,
             "the fast students' grades while two slow ones run")
    note = (course / ".grading.lock").read_text()
    assert "--db-url" in note and password not in note, note
    server = services.processes(postgres["processes"][0]["pid"])
    for pid in server:
        os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        if ctrl_c:
            time.sleep(2)  # the run asks the database every second when idle: it is waiting for an answer now
            run.send_signal(signal.SIGINT)
            out, err = ends_in_one_sentence(run, frozen, 128 + signal.SIGINT, "Stopped by ctrl-C (SIGINT)")
        else:
            out, err = ends_in_one_sentence(run, frozen, 5, "Grading stopped: the gradebook database "
                                            "postgresql+psycopg://grader:***@127.0.0.1")
            assert re.search(r"stopped answering \(no answer within \d s: the server is frozen or overloaded\); "
                             "check it", err), err
    finally:
        for pid in server:
            os.kill(pid, signal.SIGCONT)
    assert password not in out + err
    found = stop_line(err)
    assert int(found.group(1)) == graded(course) < JOBS and int(found.group(2)) == JOBS
    assert not sandboxes(), "a sandbox outlived the run"
    rerun = subprocess.run(command(course, *QUICK, "--db-url", db_url), env=env(course), capture_output=True,
                           text=True, timeout=600)
    assert f"This run graded {JOBS - int(found.group(1))} notebook(s)" in rerun.stdout, rerun.stdout[-3000:]
    assert graded(course) == JOBS


@pytest.fixture
def own_dask(tmp_path):
    """A Dask scheduler and one worker on loopback for one test (it may kill them)."""
    with dask_on_loopback(tmp_path / "dask", 1) as services:
        yield services


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
def test_the_scheduler_killed_or_frozen_mid_run_ends_it_in_one_sentence(course, own_dask, sig):
    """SIGKILL (or SIGSTOP) to the scheduler while a slow student's sandbox runs on the worker: the run says so
    within seconds; a killed scheduler's worker ends its sandboxes as it closes (a frozen one's end at their
    time limit); the rerun (threads here) grades exactly the rest."""
    run = subprocess.Popen(command(course, *PATIENT, "--scheduler", own_dask["scheduler"]), env=env(course),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: graded(course) >= len(FAST) * len(kit.NOTEBOOKS) and sandboxes(),
             "the fast students' grades while a slow one runs")
    scheduler = next(p for p in own_dask["processes"] if p["name"] == "dask-scheduler")
    os.killpg(scheduler["pid"], sig)
    try:
        out, err = ends_in_one_sentence(run, time.monotonic(), 7, f"Grading stopped: the Dask scheduler at "
                                        f"{own_dask['scheduler']} " + ("closed the connection (it stopped or was "
                                                                       "killed); start it again with its workers"
                                                                       if sig == signal.SIGKILL else
                                                                       "did not answer within 5 s"))
    finally:
        if sig == signal.SIGSTOP:
            os.killpg(scheduler["pid"], signal.SIGKILL)  # (its worker then closes, and ends its sandboxes)
    assert int(stop_line(err).group(1)) == graded(course) < JOBS
    wait_for(lambda: not sandboxes(), "the worker to end its sandboxes as it closes", timeout=60)
    rerun_grades_the_rest(course, graded(course))


def test_the_only_worker_at_this_version_dying_ends_the_run_in_one_sentence(course, own_dask, tmp_path):
    """The one worker at the run's version is killed (with its nanny) while a worker at another version stays:
    no job can run any more, and the run says so within seconds instead of waiting for ever."""
    other = other_version_worker(own_dask["scheduler"], tmp_path)
    try:
        wait_for_workers(own_dask["scheduler"], 2)
        run = subprocess.Popen(command(course, *PATIENT, "--scheduler", own_dask["scheduler"]), env=env(course),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: graded(course) >= len(FAST) * len(kit.NOTEBOOKS) and sandboxes(),
                 "the fast students' grades while a slow one runs")
        victim = next(p for p in own_dask["processes"] if p["name"] == "dask-worker-0")
        os.killpg(victim["pid"], signal.SIGKILL)
        out, err = ends_in_one_sentence(run, time.monotonic(), 6, "Grading stopped: no Dask worker that runs this "
                                        "grader version has been connected for")
        assert "1 connected worker(s) run another version" in err and "mha_grader/trusted/judging.py differs" in err, err
        assert "start workers from a checkout of this commit" in err
    finally:
        os.killpg(other.pid, signal.SIGTERM)
        other.wait(timeout=60)
    assert int(stop_line(err).group(1)) == graded(course) < JOBS
    rerun_grades_the_rest(course, graded(course))


# --- the operator's rough edges (issue 35, item 4): each one sentence, its exit status, the command to go on ----

def no_traceback(*texts: str) -> None:
    joined = "\n".join(texts)
    assert "Traceback" not in joined and "Exception" not in joined, joined[-3000:]


def sqlite_write_lock(db: Path, until: threading.Event, ready: threading.Event, when) -> threading.Thread:
    """A thread that, once ``when()`` holds, takes an exclusive lock on the sqlite file ``db`` (as a program
    writing to it holds it while it commits: nobody else may read or write) and keeps it until ``until``."""
    import sqlite3

    def hold():
        while not when() and not until.is_set():
            time.sleep(0.005)
        db_ = sqlite3.connect(db, timeout=60, isolation_level=None)
        db_.execute("BEGIN EXCLUSIVE")
        ready.set()
        until.wait()
        db_.execute("ROLLBACK")
        db_.close()
    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_an_export_that_fails_after_grading_says_so_and_how_to_export_again(course):
    """The gradebook is locked by another program (formgrader writing to it) between the last grade and
    `nbgrader export` (--export, what `make grade` runs): every grade is recorded, grades.csv is not written,
    one sentence says so and gives the command that exports again; that command, once the lock is gone,
    grades nothing and exports."""
    students = [option for s in FAST for option in ("--student", s)]
    typed = command(course, *QUICK, "--export", *students)
    done, locked = threading.Event(), threading.Event()
    holder = sqlite_write_lock(course / "gradebook.db", done, locked,
                               lambda: (course / "grades_by_student.csv").exists())  # (the summary: grading is over)
    try:
        run = subprocess.run(typed, env=env(course), capture_output=True, text=True, timeout=600)
    finally:
        done.set()
        holder.join(timeout=60)
    assert locked.is_set(), "the lock was never taken"
    assert run.returncode == 8, run.stdout[-3000:] + run.stderr[-3000:]
    no_traceback(run.stdout, run.stderr)
    line = next((s for s in run.stderr.splitlines() if s.startswith("Every grade is recorded")), "")
    assert line == ("Every grade is recorded, but grades.csv was not written: the gradebook is locked: another program "
                    "(formgrader, or another nbgrader command) is writing to it; wait until it is done. Export again "
                    f"with: {shlex.join(typed)}"), run.stderr[-3000:]
    assert all(s.startswith(SAID) or s.startswith("Every grade is recorded") for s in run.stderr.splitlines() if s)
    assert graded(course) == len(FAST) * len(kit.NOTEBOOKS)
    assert not (course / "grades.csv").exists() and not (course / "grades.csv.partial").exists()
    again = subprocess.run(shlex.split(line.split("Export again with: ")[1]), env=env(course), capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "This run graded 0 notebook(s)." in again.stdout and "Exported the gradebook to grades.csv" in again.stdout
    with open(course / "grades.csv", encoding="utf-8") as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    assert set(FAST) <= set(rows) and all(float(rows[s]["raw_score"]) > 0 for s in FAST), rows


def test_make_grade_runs_one_command_whose_status_is_the_grader_s(tmp_path):
    """`make grade` is the grader's one command, export included (--export before the instructor's ARGS), so that
    the README's exit statuses reach a script through `python -m mha_grader ... grade --export` as they are, and
    make names each in its last line (GNU make itself exits 2 for any failure: no makefile can change that)."""
    (tmp_path / "gradebook.db").write_text("")
    for status in (0, 1, 3, 5, 8):
        run = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(kit.REPO), "-o", ".venv/.installed",
                              "grade", f"COURSE={tmp_path}", f"GRADER=sh -c 'echo \"$$@\"; exit {status}' run",
                              "ARGS=--student s1", "NBGRADER=echo exported separately"], capture_output=True, text=True,
                             env=outside_make())
        assert run.stdout.splitlines() == ["grade --export --student s1"], run.stdout + run.stderr
        assert (run.returncode, run.stderr.strip()) == ((0, "") if status == 0 else (2, f"make: *** [Makefile:{_line()}: "
                                                                                      f"grade] Error {status}")), run.stderr


def outside_make() -> dict:
    """This process's environment as a shell's (under `make test`, MAKELEVEL would make make say 'make[1]')."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


def _line() -> int:
    """The line of the Makefile's grade recipe that runs the grader."""
    lines = (kit.REPO / "Makefile").read_text().splitlines()
    return next(i for i, s in enumerate(lines, 1) if "grade --export $(ARGS)" in s)


def test_a_secret_that_is_a_folder_stops_the_run_in_one_sentence(course, tmp_path):
    folder = tmp_path / "secrets"
    folder.mkdir()
    run = subprocess.run(command(course, *QUICK), env={**env(course), "MHA_GRADER_SECRET": str(folder)},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    no_traceback(run.stdout, run.stderr)
    assert run.stderr.splitlines()[-1] == (
        f"Grading did not start: $MHA_GRADER_SECRET ({folder}) is a folder, not a file: it must name the file that "
        "holds the secret, one line of 64 hexadecimal digits (what `make secret` writes). Point $MHA_GRADER_SECRET at "
        "the file of the secret that graded this class; only if none did yet, create one with `make secret` (or "
        f"`python -m mha_grader secret`); then run again: {shlex.join(command(course, *QUICK))}"), run.stderr
    assert not (course / "autograded").exists()


HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize("kind, said", [
    ("a folder", "is a folder, not a file"), ("an empty file", "it holds nothing, not one line of 64 hexadecimal"),
    ("blank space", "it holds only blank space"), ("too short", "it holds 32 hexadecimal digits, not one line of 64"),
    ("too long", "it holds 65 hexadecimal digits"), ("not hexadecimal", "it holds 64 characters, 64 of them not"),
    ("two lines", "it holds 2 lines"), ("binary", "it holds 100 bytes that are not plain text"),
    ("huge", "it holds more than 4096 bytes"), ("a link to nothing", "is a link to"),
    ("a link to itself", "is a link that leads back to itself"), ("a FIFO", "is a FIFO, not a file"),
    ("under a file", "is a path through a file, not a folder"), ("missing", "No course secret at"),
    ("a good link", None), ("a good file", None)])
def test_every_unusable_secret_is_named_without_a_word_of_it(tmp_path, monkeypatch, kind, said):
    """What the secret's path names, and what its file holds, said in one sentence: what was expected, what was
    found (never its content), what to do. A FIFO is not waited on; a link to a good file is followed."""
    from mha_grader.trusted import secret
    target = tmp_path / "secret"
    make = {"a folder": lambda: target.mkdir(), "an empty file": lambda: target.write_text(""),
            "blank space": lambda: target.write_text("  \n"), "too short": lambda: target.write_text("7" * 32),
            "too long": lambda: target.write_text("7" * 65 + "\n"), "not hexadecimal": lambda: target.write_text("q" * 64),
            "two lines": lambda: target.write_text(HEX + "\n" + HEX + "\n"),
            "binary": lambda: target.write_bytes(bytes(range(100, 200))), "huge": lambda: target.write_text("7" * 10_000),
            "a link to nothing": lambda: target.symlink_to(tmp_path / "gone"),
            "a link to itself": lambda: target.symlink_to(target), "a FIFO": lambda: os.mkfifo(target),
            "under a file": lambda: None, "missing": lambda: None,
            "a good link": lambda: ((tmp_path / "real").write_text(HEX + "\n"), target.symlink_to(tmp_path / "real")),
            "a good file": lambda: target.write_text(HEX + "\n")}
    make[kind]()
    if kind == "under a file":
        (tmp_path / "plain").write_text("x")
        target = tmp_path / "plain" / "secret"
    monkeypatch.setenv(secret.ENV, str(target))
    if said is None:
        assert secret.load() == HEX.encode()
        return
    with pytest.raises(secret.NoSecret) as err:
        secret.load()
    message = str(err.value)
    assert said in message and str(target) in message, message
    assert "qqqq" not in message and "7777" not in message and "\n" not in message
    assert "make secret" in message, message


def test_the_secret_command_refuses_a_folder_or_a_link_in_one_sentence(tmp_path):
    for kind in ("folder", "link"):
        target = tmp_path / kind
        target.mkdir() if kind == "folder" else target.symlink_to(tmp_path / "elsewhere")
        run = subprocess.run([sys.executable, "-m", "mha_grader", "secret"], env={**kit.env(), "MHA_GRADER_SECRET":
                             str(target)}, capture_output=True, text=True, timeout=120)
        assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
        what = "a folder" if kind == "folder" else "a link to nothing"
        assert f"$MHA_GRADER_SECRET ({target}) is {what}, not the secret's file" in run.stderr, run.stderr
        assert not (tmp_path / "elsewhere").exists()


def test_the_terminal_closed_stops_the_run_and_its_log_says_how_to_resume(course):
    """The terminal a run was started in is closed (its pseudo-terminal's other end goes: the kernel sends SIGHUP):
    the run stops as for ctrl-C, and its own log, grading.log in the course folder, holds the stop line with the
    command that resumes, since the terminal is gone; the rerun grades exactly the rest. A run started with SIGHUP
    ignored (nohup) goes on to its end."""
    main, terminal = pty.openpty()

    def controlling_terminal():  # (and SIGHUP as a terminal's shell leaves it: not ignored, whatever the suite got)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    typed = command(course, *PATIENT)
    proc = subprocess.Popen(typed, env=env(course), stdin=terminal, stdout=terminal, stderr=terminal,
                            start_new_session=True, preexec_fn=controlling_terminal)
    os.close(terminal)
    shown = bytearray()

    def ready():  # (what the terminal shows is read here: a read blocked in a thread would keep it open)
        while select.select([main], [], [], 0)[0]:
            shown.extend(os.read(main, 65536))
        return graded(course) >= len(FAST) * len(kit.NOTEBOOKS) and len(sandboxes()) >= 2
    wait_for(ready, "the fast students to be graded while two slow ones run")
    os.close(main)  # the terminal window closed
    closed = time.monotonic()
    proc.wait(timeout=60)
    print(f"ended {time.monotonic() - closed:.1f} s after the terminal closed")
    assert proc.returncode == 128 + signal.SIGHUP
    log = (course / "grading.log").read_text()
    no_traceback(log)
    assert log.startswith(f"--- ") and shlex.join(typed) in log.splitlines()[0]
    found = stop_line(log)
    assert f"Stopped by SIGHUP (its terminal was closed). This run graded and recorded" in log
    assert log.rstrip().endswith(f"Resume with: {shlex.join(typed)}"), log[-2000:]
    assert int(found.group(1)) == graded(course) < JOBS and int(found.group(2)) == JOBS
    assert not sandboxes(), "a sandbox outlived the run"
    rerun_grades_the_rest(course, graded(course))

    nohup = subprocess.Popen(command(course, *QUICK, "--force", "--student", SLOW[0]), env=env(course),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    wait_for(lambda: sandboxes(), "its spinning job")
    nohup.send_signal(signal.SIGHUP)
    out, err = nohup.communicate(timeout=300)
    assert nohup.returncode == 0 and f"This run graded {len(kit.NOTEBOOKS)} notebook(s)." in out, out + err
    runs = [s for s in (course / "grading.log").read_text().splitlines() if s.startswith("--- ")]
    assert len(runs) == 3, runs


def test_a_changed_secret_is_refused_unless_the_instructor_says_so(course, tmp_path):
    """Graded with one secret, then run with another: nothing is graded, one sentence names the change by the two
    fingerprints (never a secret) and the two ways on; --new-secret grades those notebooks again, and their stamps
    name the new secret."""
    from mha_grader.trusted import secret
    students = [option for s in FAST for option in ("--student", s)]
    first = subprocess.run(command(course, *QUICK, *students), env=env(course), capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    old, new = HEX, "fedcba9876543210" * 4
    (tmp_path / "new-secret").write_text(new + "\n")
    other = {**env(course), "MHA_GRADER_SECRET": str(tmp_path / "new-secret")}
    before = {p: p.stat().st_mtime_ns for p in (course / "autograded").glob("*/mha/*.result.json")}
    assert len(before) == graded(course) == len(FAST) * len(kit.NOTEBOOKS)
    typed = command(course, *QUICK, *students)
    run = subprocess.run(typed, env=other, capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    no_traceback(run.stdout, run.stderr)
    line = run.stderr.splitlines()[-1]
    old_fp, new_fp = secret.fingerprint(old.encode()), secret.fingerprint(new.encode())
    assert line.startswith(f"Grading did not start: the course secret changed: {len(before)} of the notebooks asked "
                           f"for were graded with another secret (fingerprint {old_fp}), not with {tmp_path / 'new-secret'}"
                           f" (fingerprint {new_fp})."), line
    assert line.endswith(f"run again: {shlex.join(typed)}; if on purpose, grade them again with this one: "
                         f"{shlex.join(typed + ['--new-secret'])}"), line
    assert {p: p.stat().st_mtime_ns for p in before} == before, "a notebook was graded again"
    assert all(s["secret"] == old_fp for stamp in stamps(course).values() for s in stamp.values())
    again = subprocess.run(typed + ["--new-secret"], env=other, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"This run graded {len(before)} notebook(s)." in again.stdout
    assert all(s["secret"] == new_fp for stamp in stamps(course).values() for s in stamp.values())
    kept = "\n".join(p.read_text() for p in (course / "autograded").rglob("*") if p.is_file()) \
        + (course / "grading.log").read_text()
    assert old not in kept and new not in kept, "a secret was written into the course"


def test_the_notes_describe_the_class_after_a_stop_and_a_resume(course):
    """A notebook that is not JSON, a renamed one, and a file handed in besides: their notes are in notes.csv and
    the summary after the run that graded them was stopped and another finished the class, and after a run for
    one other student only. The unreadable notebook is not counted among the named mistakes."""
    kit.submit(course, "b_broken", {"01_project": "{not json"})
    kit.submit(course, "c_renamed", {"my copy": kit.filled(course, "01_project")})
    (course / "submitted" / FAST[0] / "mha" / "scratch.txt").write_text("draft")
    everyone = JOBS + 2 * len(kit.NOTEBOOKS)
    run = subprocess.Popen(command(course, *PATIENT), env=env(course), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    wait_for(lambda: graded(course) >= (len(FAST) + 2) * len(kit.NOTEBOOKS) and len(sandboxes()) >= 2,
             "the first students to be graded while two slow ones run")
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGTERM, err[-3000:]
    rerun = subprocess.run(command(course, *QUICK), env=env(course), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert graded(course) == everyone and 0 < int(re.search(r"This run graded (\d+)", rerun.stdout).group(1)) < everyone
    one = subprocess.run(command(course, *QUICK, "--student", SLOW[0]), env=env(course), capture_output=True,
                         text=True, timeout=600)
    assert "This run graded 0 notebook(s)." in one.stdout, one.stdout[-3000:]
    for output in (rerun.stdout, one.stdout):
        assert "Not graded (1; why: notes.csv): b_broken/01_project" in output, output[-3000:]
        assert "unreadable notebook" not in output
    for note in ("b_broken/01_project: not graded: 01_project.ipynb is not a notebook",
                 "c_renamed: my copy.ipynb is graded as 01_project.ipynb",
                 f"{FAST[0]}: 1 item(s) handed in besides the notebooks were not read (1 other file): scratch.txt."):
        assert any(n.startswith(note) for n in run_notes(course)), (note, run_notes(course))
    with open(course / "mistakes.csv", encoding="utf-8") as fh:
        kinds = {row["mistake"]: row["kind"] for row in csv.DictReader(fh)}
    assert kinds.get("unreadable notebook") == "not graded", kinds


def test_messages_are_sentences_whatever_they_embed():
    """The message builders never embed a sentence's full stop in another ("differs).; start"), never print an
    absent value ("exit status None"), and a label of a test that gave no result names its function."""
    from types import SimpleNamespace
    from mha_grader.trusted import cluster, execute, judging, report, run as run_mod
    from mha_grader.walls import sandbox

    def sentence(text: str) -> str:
        assert not re.search(r"\.\s*[.;,:)]|\bNone\b|\n", text), text
        return text
    refusal = "Dask worker tcp://127.0.0.1:1 takes no job: its grader is not this one (mha_grader/x.py differs)."
    sentence(cluster.no_worker([refusal], 12.0, ["tcp://127.0.0.1:2"]))
    sentence(cluster.no_worker([refusal]))
    sentence(execute.sentence(ValueError("bad value.")) + ".")
    limits, quiet = sandbox.Limits(), sandbox.Report(returncode=0)
    for status in ("timeout", "cells", "budget", "large", "signal", "exit", None):
        for detail in (None, 3, "no inputs"):
            sentence(judging._no_outcome({"status": (status, detail) if status else None}, quiet, limits))
        label = judging._no_outcome_label({"status": (status, None) if status else None}, "split_heads")
        assert label.startswith("split_heads: ") and report.kind(label) == report.MISTAKE, label
    assert "exit status" not in judging._no_outcome({"status": ("exit", None)}, quiet, limits)
    for label in judging.NOT_MISTAKES:
        assert report.kind(label) == report.NOT_GRADED_KIND
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        run_mod._stopped(None, SimpleNamespace(done=lambda: None), "Grading stopped: the scheduler went away.", [],
                         [{}], "make grade")
    sentence(printed.getvalue().strip())
