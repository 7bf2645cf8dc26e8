"""A grade decided by the student's code alone: the same marks on a quiet, a busy and a paused machine (issue 35).

One small class holds every kind of answer of the test corpora (tests/submissions/every_kind.py: right
answers, mutants, hostile and untrusted submissions, honest corpus entries that import torch in a NumPy
exercise, a ready-made route, and the answers whose time is the question: endless loops, a spinner,
sleeps, a read that never returns, a process that stops itself, honest code that takes a good part of
its time), graded with the static rule off (the rule admits no code that sleeps; the time limits beneath
it must hold), with the limits the untrusted catalogue uses (3 s a test, 8 s a notebook), three times:

  (a) on a quiet machine, by the local threads;
  (b) beside noisy neighbours started here (tests/neighbours.py: 4 sessions of 16 busy processes, un-niced:
      the load average reaches 30 within about 20 s and stays above it on 2 cores, and each of the two
      sandbox jobs gets about a third of a core; the benchmark's 8 sessions leave it a fifth), then stopped;
  (c) on Dask (scripts/services.py: a scheduler and two workers on loopback, worker-ttl 15 s), one of the
      two worker processes SIGSTOPped while it holds a job, until the scheduler has dropped it (Dask's nanny
      restarts it) or 60 s at most (the benchmark's stop is 90 s: bench/bench_fair_time.py).

Every grade, feedback page, autograded notebook, CSV file and class report is byte-identical across the
three; (a) gives each answer what it is worth; (c) names the stopped worker on the terminal and grades each
notebook once. On the code before issue 35, (b) zeroes honest notebooks (the torch imports, the slow but
honest answers: their wall-clock time ran out) and (c) zeroes the notebook the stopped worker held (its
report was read after the wall-clock limit). CI cost: about 5 minutes on 2 cores (the three gradings,
the load reaching 30, the Dask services).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neighbours import Neighbours
from submissions import every_kind, kit
from submissions.every_kind import differences, outputs
from submissions.waiting import WAITING

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")
LIMITS = ("--test-seconds", "3", "--notebook-seconds", "8")
SERVICES = kit.REPO / "scripts" / "services.py"


def grader(course: Path, *options: str) -> list[str]:
    """The grader with its static rule off, as an instructor runs it (`python -m mha_grader ... grade`)."""
    return [sys.executable, str(kit.WITHOUT_RULE), "--course", str(course), "grade", "--workers", "2", *LIMITS,
            *options]


def env(course: Path) -> dict:
    secret = course.parent / "course.secret"
    if not secret.exists():
        secret.write_text("0123456789abcdef" * 4 + "\n")
        secret.chmod(0o600)
    return kit.grader_env(secret)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory):
    """The class, and (a): graded on a quiet machine. Copies of the course before grading go to (b) and (c)."""
    base = tmp_path_factory.mktemp("fair")
    course = kit.make_course(base / "a" / "course")
    students = every_kind.small(course)
    for copy in ("b", "c"):
        shutil.copytree(base / "a", base / copy, symlinks=True)
    start = time.monotonic()
    run = subprocess.run(grader(course), env=env(course), capture_output=True, text=True, timeout=900)
    print(f"(a) quiet: {time.monotonic() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")
    return {"base": base, "course": course, "students": students, "run": run, "seconds": time.monotonic() - start}


def test_a_quiet_run_gives_each_answer_what_it_is_worth(quiet):
    run, course = quiet["run"], quiet["course"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    scores = kit.scores(course)
    assert set(scores) == set(quiet["students"])
    for case in WAITING:  # what each answer whose time is the question is worth, and what its feedback says
        for notebook, points in case.points.items():
            assert sum(v for k, v in scores[case.student][notebook].items() if k != "needs_manual_grade") == points, \
                (case.student, notebook, scores[case.student])
        for notebook, phrase in case.says.items():
            assert phrase in kit.feedback_text(course, case.student, notebook), (case.student, notebook)
    honest = {"s00_correct": kit.NOTEBOOKS, "h32_project_torch_from_numpy": ["01_project"],
              "h34_split_nanogpt_view_transpose": ["02_split_heads"]}  # (the last two import torch in a NumPy exercise)
    full = kit.max_scores(course)  # (a test's points: some are worth 2)
    for student, notebooks in honest.items():
        for notebook in notebooks:
            tests = scores[student][notebook]
            assert all(v == full[notebook][k] for k, v in tests.items() if k != "needs_manual_grade"), \
                (student, notebook, tests)
    stopped = kit.feedback_text(course, "w01_sleeps_in_its_function", "02_split_heads")
    assert "stopped after 3 s" in stopped and "None" not in stopped  # a real N: the limit that stopped it


@pytest.fixture(scope="module")
def busy(quiet):
    """(b): the same class graded beside noisy neighbours that hold the load average at 30 or more."""
    course = quiet["base"] / "b" / "course"
    with Neighbours(sessions=4, processes=16) as neighbours:
        waited = neighbours.wait_for_load(30)
        mark, start = neighbours.mark(), time.monotonic()
        run = subprocess.run(grader(course), env=env(course), capture_output=True, text=True, timeout=1800)
        seconds, load = time.monotonic() - start, neighbours.load(since=mark)
    print(f"(b) busy: {seconds:.0f} s, load average {load[0]:.1f} to {load[1]:.1f} (reached 30 after {waited:.0f} s)")
    return {"course": course, "run": run, "load": load, "seconds": seconds}


def test_a_busy_machine_changes_no_grade_and_no_byte(quiet, busy):
    assert busy["load"][0] >= 30, busy["load"]  # (the condition of the proof: not a timing of the grader)
    assert busy["run"].returncode == 0, busy["run"].stdout[-3000:] + busy["run"].stderr[-3000:]
    assert kit.scores(busy["course"]) == kit.scores(quiet["course"])
    assert differences(outputs(busy["course"]), outputs(quiet["course"])) == []


@pytest.fixture(scope="module")
def paused(quiet):
    """(c): the class graded on Dask; one worker process SIGSTOPped while it holds a job, until the scheduler has
    dropped it (its nanny restarts it), 60 s at most."""
    from distributed import Client
    course = quiet["base"] / "c" / "course"
    folder = quiet["base"] / "dask"
    script = [sys.executable, str(SERVICES)]
    started = subprocess.run([*script, "start", str(folder), "--dask-workers", "2", "--worker-preload",
                              str(kit.WITHOUT_RULE)], capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    scheduler = json.loads(started.stdout)["scheduler"]
    try:
        with Client(scheduler, timeout="30s") as client, open(folder / "grader.err", "w+") as err:
            pids = client.run(os.getpid)  # {worker address: its process}
            start = time.monotonic()
            run = subprocess.Popen(grader(course, "--scheduler", scheduler), env=env(course), stdout=subprocess.PIPE,
                                   stderr=err, text=True)
            victim = _holder_once_graded(client, course, run, want=len(quiet["students"]) // 3)
            os.kill(pids[victim], signal.SIGSTOP)
            stopped, seen = time.monotonic(), {}  # seen: when the run said what of the victim (for the print)
            while victim in client.scheduler_info()["workers"] and time.monotonic() - stopped < 60:
                _when_said(folder / "grader.err", victim, seen, stopped)
                time.sleep(0.5)
            held = time.monotonic() - stopped
            try:
                os.kill(pids[victim], signal.SIGCONT)  # (its nanny has killed it by now, where Dask dropped it)
            except ProcessLookupError:
                pass
            while run.poll() is None:
                _when_said(folder / "grader.err", victim, seen, stopped)
                time.sleep(0.5)
            out, _ = run.communicate(timeout=900)
            err.seek(0)
            said = err.read()
    finally:
        subprocess.run([*script, "stop", str(folder)], capture_output=True, timeout=300)
    seconds = time.monotonic() - start
    print(f"(c) Dask: {seconds:.0f} s (quiet: {quiet['seconds']:.0f} s); {victim} stopped {held:.0f} s, named after "
          f"{seen.get('named', -1):.0f} s, dropped after {seen.get('dropped', -1):.0f} s; load average "
          f"{os.getloadavg()[0]:.1f}")
    print("\n".join(line for line in said.splitlines() if line.startswith("Dask")))
    return {"course": course, "returncode": run.returncode, "out": out, "err": said, "victim": victim}


def _when_said(log: Path, victim: str, seen: dict, since: float) -> None:
    """Note when the run's terminal first named ``victim`` as silent, and as dropped (seconds after ``since``)."""
    text = log.read_text()
    for key, words in (("named", "has not answered the scheduler"), ("dropped", "dropped by the scheduler")):
        if key not in seen and any(victim in line and words in line for line in text.splitlines()):
            seen[key] = time.monotonic() - since


def _holder_once_graded(client, course: Path, run: subprocess.Popen, want: int) -> str:
    """The address of a worker that holds a job of the run, once ``want`` students have a feedback page."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        done = len({p.parts[-3] for p in (course / "feedback").glob("*/mha/*.html")})
        holding = [w for w, keys in client.processing().items() if any(str(k).startswith("mha-grade/") for k in keys)]
        if done >= want and holding:
            return holding[0]
        time.sleep(0.2)
    raise AssertionError("no worker held a job after the first grades")


def test_a_paused_worker_is_named_and_changes_no_grade_and_no_byte(quiet, paused):
    assert paused["returncode"] == 0, paused["out"][-3000:] + paused["err"][-3000:]
    named = [line for line in paused["err"].splitlines() if paused["victim"] in line]
    assert any("has not answered the scheduler" in line for line in named), paused["err"][-3000:]
    assert any("dropped by the scheduler" in line for line in named), paused["err"][-3000:]
    graded = [int(re.search(r"This run graded (\d+) notebook", out).group(1)) for out in (paused["out"], quiet["run"].stdout)]
    assert graded[0] == graded[1], graded  # each notebook once: none lost, none counted twice
    assert kit.scores(paused["course"]) == kit.scores(quiet["course"])
    assert differences(outputs(paused["course"]), outputs(quiet["course"])) == []


def test_a_job_the_machine_holds_back_is_graded_by_the_next_run_never_zeroed(tmp_path):
    """Every time the sleeping answer's job is tried, all its processes are SIGSTOPped from outside past its
    wall-clock backstop (10 times its 1 s): the run says the notebook could not be graded because the machine held
    its job back (on the terminal and in notes.csv), stamps nothing and exits 1; nothing pauses the next run,
    which grades it as its code deserves (0: "stopped after 1 s"). On the code before issue 35 the first run
    stamped that 0."""
    from test_sandbox import _descendants
    course = kit.make_course(tmp_path / "course")
    student = next(w for w in WAITING if w.student == "w01_sleeps_in_its_function")
    student.submit(course)
    command = [*grader(course)[:-len(LIMITS)], "--test-seconds", "1", "--notebook-seconds", "2",
               "--notebook", "02_split_heads"]
    run = subprocess.Popen(command, env=env(course), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    paused = set()
    while run.poll() is None:  # each new job of this run: paused 11 s (its pid 1 and its child)
        jobs = [pid for pid in _descendants(run.pid) if pid not in paused and _a_jobs(pid)]
        if jobs:
            time.sleep(0.3)  # (its child runs the cells by now)
            jobs = [pid for pid in _descendants(run.pid) if _a_jobs(pid)]
            for pid in jobs:
                _signal(pid, signal.SIGSTOP)
            time.sleep(11)
            for pid in jobs:
                _signal(pid, signal.SIGCONT)
            paused.update(jobs)
        time.sleep(0.05)
    out, err = run.communicate()
    where = f"{student.student}/02_split_heads"
    assert run.returncode == 1, out[-2000:] + err[-2000:]
    assert re.search(rf"1 could not be graded .*\n  {where}: the machine held its job back", out), out[-2000:]
    notes = (course / "notes.csv").read_text()
    assert f"{where}: could not be graded: the machine held its job back" in notes, notes
    assert not (course / "autograded" / student.student / "mha" / ".graded.json").exists() or \
        "02_split_heads" not in json.loads((course / "autograded" / student.student / "mha" / ".graded.json").read_text())
    again = subprocess.run(command, env=env(course), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "stopped after 1 s" in kit.feedback_text(course, student.student, "02_split_heads")


def _a_jobs(pid: int) -> bool:
    """Whether ``pid`` runs as a sandbox job's user (False once it has ended)."""
    from mha_grader.walls import sandbox
    try:
        return sandbox.UID_BASE <= os.stat(f"/proc/{pid}").st_uid < sandbox.UID_BASE + sandbox.SLOTS
    except FileNotFoundError:
        return False


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:  # (it ended meanwhile)
        pass
