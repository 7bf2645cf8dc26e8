"""The coordinator's ceiling (a measurement, not a test): how many notebooks a second the one process that
plans and records can take, fed by simulated workers that give back recorded results at any rate.

At cluster scale every worker shares one coordinating process: it plans the class, makes each job, takes
each result off the wire, writes the stored result and the two feedback files, commits the grades into the
gradebook in batches, stamps the notebooks and draws the progress, then writes the class's tables. This
runs that process as it is (`run.grade`: the course lock, planning, the gradebook writer, the recorder,
the progress display, the summary) with one thing replaced, the backend: W simulated workers, each taking
JOB_S seconds a notebook (so they offer W / JOB_S notebooks a second; "all" gives every result at once),
give back for each job the result recorded for its notebook's bytes, pickled as Dask carries it (the
unpickling is the coordinator's cost, as it is behind Dask). No sandbox runs.

1. Recording: a sample class (one student of each kind of bench_scale's generated class) is graded for
   real (`python -m mha_grader grade`, sandboxed); each notebook's result and its rendered feedback
   (what a worker sends back) is kept, by the sha256 of the notebook's bytes.
2. The class: --students students generated as bench_scale generates them (each kind's files copied).
3. Ceiling: for sqlite and PostgreSQL (scripts/services.py, loopback), for each W, a fresh gradebook and
   course state, then the coordinator in a process of its own on --sweep-students students; printed:
   offered rate, notebooks/s (first result to last), the coordinator's CPU per notebook.
4. The whole class (all results at once), sqlite and PostgreSQL: wall time of the grading phase against
   the goal (10,000 students in under 2 minutes: set for 5 notebooks a student, held for every notebook of the
   course), and the process's peak memory.
5. Memory: the same for growing classes (each in a process of its own): peak resident memory and its
   growth per 1,000 students.

The machine may be shared (2 cores, other engineers' work): every figure is inflated by that load, the
load average is printed beside each table, and the workers' offered rate is compared within one run.

A run's files are set aside (renamed into the work folder's set-aside/), not deleted, until the bench ends.
ext4 without a journal (as on the machines this project is developed on) skips, one by one, the inodes
freed in the last 60 s when it makes a file, 360 s while their inode table is not yet written back
(RECENTCY_MIN, plus RECENTCY_DIRTY, in the kernel's fs/ext4/ialloc.c): deleting the last run's ~210,000 files
just before a run made every file the next one writes dearer (PostgreSQL, 10,000 students, interleaved:
351 recorded nb/s after a delete, 589 and 548 after a rename; a 35 s wait after the delete did not help).
The bench needs the disk for all its runs' files: ~2.4 GB a run of 10,000 students, ~13 GB for the
default tables; a bench started soon after another's end (where that one deletes them) can pay for it too.

    .venv/bin/python bench/bench_coordinator.py [--students 10000] [--sweep-students 1000]
        [--workers 1,4,16,64,256,1024,all] [--job-s 1.0] [--sizes 1000,2500,5000,10000] [--keep DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
import bench_scale  # noqa: E402  (its class generator)
from submissions import classroom, kit  # noqa: E402  (the test suite's submission builders)

GOAL_RATE, GOAL_S = 500, 120  # notebooks a second; a class of 10,000 students recorded in under 2 minutes
MISSING = "was not handed in"


# --- 1. recorded results ------------------------------------------------------------------------

def record_sample(work: Path, secret: Path) -> dict[tuple[str, str], bytes]:
    """{(notebook, sha256 of its bytes or MISSING): the pickled result a worker sends back}, from a real,
    sandboxed grading of one student of each kind."""
    course = kit.make_course(work / "sample")
    bench_scale.generate(course, len(classroom.recipes(kit.NOTEBOOKS)))
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret), "PYTHONPATH": str(ROOT)}
    env.pop("MHA_GRADER_DB_URL", None)
    graded = subprocess.run([sys.executable, "-m", "mha_grader", "--course", str(course), "grade"], cwd=ROOT,
                            env=env, capture_output=True, text=True)
    if graded.returncode not in (0, 1):
        sys.exit(f"grading the sample failed:\n{graded.stderr[-3000:]}")
    recorded = {}
    for folder in sorted((course / "submitted").iterdir()):
        student = folder.name
        for name in kit.NOTEBOOKS:
            stored = course / "autograded" / student / kit.ASSIGNMENT / f"{name}.result.json"
            if not stored.is_file():
                continue
            result = json.loads(stored.read_text())
            result["feedback"] = {
                "page": (course / "feedback" / student / kit.ASSIGNMENT / f"{name}.html").read_text(),
                "notebook": (course / "autograded" / student / kit.ASSIGNMENT / f"{name}.ipynb").read_text()}
            recorded[(name, digest(folder / kit.ASSIGNMENT / f"{name}.ipynb"))] = pickle.dumps(result)
    return recorded


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else MISSING


# --- the simulated workers ----------------------------------------------------------------------

class Replay:
    """The backend of a run (the interface of execute.Threads and cluster.Dask): ``workers`` simulated
    workers (0: as many as it takes) each take ``job_s`` a notebook and give back the result recorded for
    the job's bytes. Jobs are made (planning's ``make``, when given) in the plan's order as their turn comes,
    in this process, as cluster.Dask makes them before it sends them."""

    def __init__(self, recorded: dict, workers: int, job_s: float):
        self.recorded, self.workers, self.job_s = recorded, workers, job_s
        self.fallback = {name: blob for (name, _), blob in recorded.items()}
        self.misses, self.times = 0, []

    def start(self, plan: list[dict], make=None) -> None:
        self.plan, self.make, self.t0 = plan, make, time.monotonic()

    def results(self, quiet_s: float):
        for i, record in enumerate(self.plan):
            job = self.make(record) if self.make else record
            if self.workers:  # worker i % W finishes its (i // W + 1)-th notebook then
                due = self.t0 + (i // self.workers + 1) * self.job_s
                while (wait := due - time.monotonic()) > 0:
                    time.sleep(min(wait, quiet_s))
                    if wait > quiet_s:
                        yield None  # (what the coordinator does when no result comes for a while)
            blob = self.recorded.get((job["notebook"], _job_digest(job)))
            if blob is None:
                self.misses += 1
                blob = self.fallback[job["notebook"]]
            self.times.append(time.monotonic())
            yield record, pickle.loads(blob)

    def in_progress(self) -> list[tuple[str, float]]:
        """(for the progress line) a simulated worker's job is not followed: none is named."""
        return []

    def notes(self) -> list[str]:
        return []

    def stop(self) -> int:
        return 0

    def close(self) -> None:
        pass


def _job_digest(job: dict) -> str:
    """The sha256 of the bytes a job carries (jobs.Maker: "raw"), or that planning read ("content")."""
    if job.get("raw") is not None:
        return hashlib.sha256(job["raw"]).hexdigest()
    content = job.get("content") or MISSING
    return MISSING if content.startswith("was not handed in") else content


# --- one coordinator run, in a process of its own -------------------------------------------------

def child(spec: dict) -> None:
    """Run the coordinator once as ``spec`` says and write what was measured to spec["out"] (JSON)."""
    import argparse as ap
    import resource

    sys.path.insert(0, spec.get("code") or str(ROOT))
    try:
        from mha_grader.trusted import cli, run
    except ModuleNotFoundError:  # a grader from before its three folders (--compare COMMIT): mha_grader/run.py
        from mha_grader import cli, run
    getattr(cli, "_without_iri_grammars", lambda: None)()  # (what `python -m mha_grader` does as it starts, if it does)

    with open(spec["recorded"], "rb") as fh:
        recorded = pickle.load(fh)
    replay = Replay(recorded, spec["workers"], spec["job_s"])
    marks = {}

    def backend(args, course, limits):
        marks["planned"] = time.monotonic()
        marks["rss_planned_kb"] = _rss_kb("VmRSS")
        marks["cpu_planned"], marks["thread_cpu_planned"] = _cpu(), time.thread_time()
        marks["threads_planned"] = _threads_cpu()
        return replay

    def recorded(*args, **kwargs):  # the summary starts once every grade is committed and stamped
        marks["recorded"], marks["cpu_recorded"], marks["thread_cpu_recorded"] = (time.monotonic(), _cpu(),
                                                                                  time.thread_time())
        marks["peak_recorded_kb"] = _rss_kb("VmHWM")
        marks["threads_recorded"] = _threads_cpu()
        return summary(*args, **kwargs)

    summary = run.report.summary
    run.report.summary = recorded
    run._backend = backend
    run.isolation_problems = lambda root: []  # no sandbox runs here: nothing to probe
    args = ap.Namespace(course=spec["course"], assignment=kit.ASSIGNMENT, student=[], notebook=[], force=False,
                        workers=max(1, spec["workers"]), scheduler="simulated", db_url=spec["db_url"],
                        test_seconds=10.0, notebook_seconds=60.0, unsafe_no_sandbox=False, timing=True)
    start, cpu0 = time.monotonic(), _cpu()
    screen = io.StringIO()
    saved, sys.stdout = sys.stdout, screen  # (the summary screen)
    try:
        status = run.grade(args)
    finally:
        sys.stdout = saved
    end = time.monotonic()
    times = replay.times
    if "recorded" not in marks:  # (the run stopped before its summary: its status says why)
        Path(spec["out"]).write_text(json.dumps({"status": status}))
        return
    Path(spec["out"]).write_text(json.dumps({
        "status": status, "notebooks": len(times), "misses": replay.misses,
        "recording": next((line for line in screen.getvalue().splitlines() if "Per notebook in this process" in line), ""),
        "planning_s": marks["planned"] - start, "grading_s": marks["recorded"] - marks["planned"],
        "start_to_recorded_s": marks["recorded"] - replay.t0, "summary_s": end - marks["recorded"],
        "cpu_grading_s": marks["cpu_recorded"] - marks["cpu_planned"], "cpu_s": _cpu() - cpu0,
        "thread_cpu_grading_s": marks["thread_cpu_recorded"] - marks["thread_cpu_planned"],
        "threads_cpu_grading_s": {name: cpu - marks["threads_planned"].get(name, 0.0)
                                  for name, cpu in marks["threads_recorded"].items()},
        "cpu_planning_s": marks["cpu_planned"] - cpu0,
        "rss_planned_kb": marks["rss_planned_kb"], "peak_recorded_kb": marks["peak_recorded_kb"],
        "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _threads_cpu() -> dict[str, float]:
    """CPU seconds of each of this process's threads, by role: "gradebook" (the database's), "files" (the file
    writers'), "progress" and "other" (the main thread's is measured apart)."""
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        role = next((r for r in ("gradebook", "files", "progress") if thread.name.startswith(f"mha-{r}")), "other")
        if thread is not threading.main_thread():
            try:
                found[role] = found.get(role, 0.0) + time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, TypeError):  # (a thread that ended meanwhile)
                pass
    return found


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


# --- the class, the gradebooks, the runs ---------------------------------------------------------

def grader_at(commit: str, dest: Path) -> Path:
    """The grader (mha_grader, mha_checks) as it was at ``commit``, in ``dest``."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "mha_grader", "mha_checks"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def set_aside(path: Path, work: Path) -> None:
    """Move ``path``, if there is one, into ``work``/set-aside/, deleted when the bench ends (see the docstring:
    a delete just before a run would slow it)."""
    if path.exists():
        (work / "set-aside").mkdir(exist_ok=True)
        path.rename(work / "set-aside" / f"{time.time_ns()}-{path.name}")


def subset(full: Path, dest: Path, students: int, work: Path) -> Path:
    """A course of the first ``students`` students of ``full`` (their files hard-linked: no copy)."""
    set_aside(dest, work)
    dest.mkdir(parents=True)
    for entry in ("exercises", "nbgrader_config.py", "gradebook.db"):
        (shutil.copytree if (full / entry).is_dir() else shutil.copy)(full / entry, dest / entry)
    for folder in sorted((full / "submitted").iterdir())[:students]:
        shutil.copytree(folder, dest / "submitted" / folder.name, copy_function=os.link)
    return dest


class Gradebooks:
    """A fresh gradebook per run, released once: sqlite (a copy of the pristine file) or PostgreSQL (a
    database made from a released template)."""

    def __init__(self, work: Path, pristine_sqlite: Path, postgres: bool):
        self.work, self.pristine = work, pristine_sqlite
        self.state, self.services = None, work / "services"
        if postgres:
            started = subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "start",
                                      str(self.services), "--postgres"], capture_output=True, text=True)
            if started.returncode:
                sys.exit(f"PostgreSQL did not start:\n{started.stderr[-2000:]}")
            self.state = json.loads(started.stdout)
            try:
                shutil.rmtree(work / "pg-release", ignore_errors=True)
                course = kit.make_course(work / "pg-release")
                released = kit.nbgrader(course, "generate_assignment", kit.ASSIGNMENT, "--force",
                                        f"--db={self.state['db_url']}", f"--CourseDirectory.course_id={kit.ASSIGNMENT}")
                if released.returncode:
                    sys.exit(f"releasing into PostgreSQL failed:\n{released.stdout[-2000:]}")
                self._sql("CREATE DATABASE pristine TEMPLATE gradebook")
            except BaseException:
                self.close()  # (the caller has no Gradebooks to close yet)
                raise

    def fresh(self, kind: str, course: Path) -> str:
        """The URL of a fresh, released gradebook of ``kind`` for ``course`` (whose run state is cleared)."""
        for folder in ("autograded", "feedback"):
            set_aside(course / folder, self.work)
        if kind == "sqlite":
            shutil.copy(self.pristine, course / "gradebook.db")
            return f"sqlite:///{course / 'gradebook.db'}"
        self._sql("DROP DATABASE IF EXISTS run", "CREATE DATABASE run TEMPLATE pristine")
        return self.state["db_url"].rsplit("/", 1)[0] + "/run"

    def _sql(self, *statements: str) -> None:
        from sqlalchemy import create_engine, text
        engine = create_engine(self.state["db_url"].rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
        with engine.connect() as db:
            for statement in statements:
                db.execute(text(statement))
        engine.dispose()

    def close(self) -> None:
        if self.state:
            subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "stop", str(self.services)],
                           capture_output=True)


def coordinate(course: Path, db_url: str, recorded: Path, workers: int, job_s: float, secret: Path,
               code: Path | None = None) -> dict:
    """One coordinator run in a process of its own (the grader of ``code``, default this tree's); what it
    measured, and the load average around it."""
    out = course.parent / "measured.json"
    spec = {"course": str(course), "db_url": db_url, "recorded": str(recorded), "workers": workers,
            "job_s": job_s, "out": str(out), "code": str(code or ROOT)}
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret), "PYTHONPATH": str(code or ROOT)}
    before = os.getloadavg()[0]
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode or not out.is_file():
        sys.exit(f"the coordinator run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    measured = json.loads(out.read_text())
    out.unlink()
    if measured["status"] not in (0, 1):
        sys.exit(f"the coordinator run ended with status {measured['status']}:\n{done.stderr[-3000:]}")
    measured["load"] = f"{before:.1f} -> {os.getloadavg()[0]:.1f}"
    return measured


def cpu_ms(m: dict) -> str:
    """The coordinator's CPU per notebook in the grading phase: all its threads; then the main thread's (making jobs,
    recording), the gradebook's (the commits) and the file writer's (each is a serial part of the pipeline)."""
    n, threads = max(m["notebooks"], 1), m.get("threads_cpu_grading_s", {})
    return (f"{m['cpu_grading_s'] / n * 1000:.2f}; {m['thread_cpu_grading_s'] / n * 1000:.2f}, "
            f"{threads.get('gradebook', 0) / n * 1000:.2f}, {threads.get('files', 0) / n * 1000:.2f}")


def rate(m: dict) -> float:
    """Notebooks a second, from the workers' start until every result is recorded (committed and stamped)."""
    return m["notebooks"] / m["start_to_recorded_s"] if m["start_to_recorded_s"] else float("inf")


# --- the tables ---------------------------------------------------------------------------------

def sweep(gradebooks: Gradebooks, kinds: list[str], course: Path, recorded: Path, workers: list[int], job_s: float,
          secret: Path, codes: dict[str, Path | None]) -> None:
    students = len(list((course / "submitted").iterdir()))
    print(f"\n### Ceiling: {students} students x {len(kit.NOTEBOOKS)} notebooks per run; simulated workers of "
          f"{job_s:g} s a notebook\n")
    print("| gradebook | simulated workers | offered (nb/s) | grader | recorded (nb/s) | of offered | CPU per notebook "
          "(ms): the process; its main, gradebook and files threads | load |\n|---|---:|---:|---|---:|---:|---|---|")
    for kind in kinds:
        for w in workers:
            for label, code in codes.items():
                m = coordinate(course, gradebooks.fresh(kind, course), recorded, w, job_s, secret, code)
                offered = w / job_s if w else float("inf")
                print(f"| {kind} | {w or 'all at once'} | {offered:.0f} | {label} | {rate(m):.0f} | "
                      f"{f'{rate(m) / offered:.0%}' if w else '-'} | {cpu_ms(m)} | {m['load']} |", flush=True)


def whole_class(gradebooks: Gradebooks, kinds: list[str], course: Path, recorded: Path, secret: Path,
                codes: dict[str, Path | None]) -> None:
    students = len(list((course / "submitted").iterdir()))
    print(f"\n### The whole class at once: {students} students x {len(kit.NOTEBOOKS)} notebooks, every result "
          f"ready (the coordinator's own pace)\n")
    print("| gradebook | grader | notebooks | planning (s) | grading phase (s) | recorded (nb/s) | CPU per notebook (ms): "
          "the process; its main, gradebook and files threads | summary and tables (s) | peak memory (MB): until recorded, with the summary "
          "| goal: < 120 s and >= 500 nb/s "
          "| load |\n|---|---|---:|---:|---:|---:|---|---:|---:|---|---|")
    for kind in kinds:
        for label, code in codes.items():
            m = coordinate(course, gradebooks.fresh(kind, course), recorded, 0, 0.0, secret, code)
            met = m["grading_s"] < GOAL_S and rate(m) >= GOAL_RATE
            print(f"| {kind} | {label} | {m['notebooks']} | {m['planning_s']:.1f} | {m['grading_s']:.1f} | "
                  f"{rate(m):.0f} | {cpu_ms(m)} | {m['summary_s']:.1f} | {m['peak_recorded_kb'] / 1024:.0f}, "
                  f"{m['peak_rss_kb'] / 1024:.0f} | "
                  f"{'met' if met else 'NOT met'} | {m['load']} |", flush=True)
        if m["misses"]:
            print(f"({m['misses']} results were not recorded for their bytes: the notebook's first recorded result "
                  "stood in)")


def memory(gradebooks: Gradebooks, full: Path, work: Path, sizes: list[int], recorded: Path, secret: Path,
           codes: dict[str, Path | None]) -> None:
    print("\n### Memory: the coordinating process's resident memory, sqlite, every result ready\n")
    print("| grader | students | notebooks | after planning (MB) | peak until recorded (MB) | peak, summary included (MB) "
          "| grading phase (s) | recorded (nb/s) | CPU per notebook (ms): the process; its main, gradebook and files "
          "threads | load |\n|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    points = {label: [] for label in codes}
    for n in sizes:
        course = subset(full, work / f"size-{n}" / "course", n, work)
        for label, code in codes.items():
            m = coordinate(course, gradebooks.fresh("sqlite", course), recorded, 0, 0.0, secret, code)
            points[label].append((n, m["rss_planned_kb"] / 1024, m["peak_recorded_kb"] / 1024, m["peak_rss_kb"] / 1024))
            print(f"| {label} | {n} | {m['notebooks']} | {m['rss_planned_kb'] / 1024:.0f} | "
                  f"{m['peak_recorded_kb'] / 1024:.0f} | {m['peak_rss_kb'] / 1024:.0f} | {m['grading_s']:.1f} | "
                  f"{rate(m):.0f} | {cpu_ms(m)} | {m['load']} |", flush=True)
        set_aside(course.parent, work)
    for label, found in points.items():
        if len(found) > 1:
            (n0, *first), (n1, *last) = found[0], found[-1]
            more = [f"{(b - a) / (n1 - n0) * 1000:.1f} MB" for a, b in zip(first, last)]
            print(f"\n{label}, per 1,000 more students: {more[0]} more after planning, {more[1]} more at the peak "
                  f"until recorded, {more[2]} more at the peak with the summary (from {n0} to {n1} students).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=10_000, help="the whole class")
    parser.add_argument("--sweep-students", type=int, default=1000, help="the class of each ceiling run")
    parser.add_argument("--workers", default="1,4,16,64,256,1024,0", help="simulated workers (0: all at once)")
    parser.add_argument("--job-s", type=float, default=1.0, help="a simulated worker's seconds a notebook")
    parser.add_argument("--sizes", default="1000,2500,5000,10000", help="classes whose memory is measured")
    parser.add_argument("--gradebooks", default="sqlite,postgresql")
    parser.add_argument("--compare", action="append", default=[], metavar="COMMIT",
                        help="also run the grader as it was at COMMIT (its mha_grader and mha_checks), or the one in "
                             "a folder, interleaved")
    parser.add_argument("--skip", default="", help="parts left out: sweep, class, memory, tree (this tree's grader: "
                                                   "only those of --compare), comma-separated")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-coordinator-"))
    work.mkdir(parents=True, exist_ok=True)
    kinds = args.gradebooks.split(",")
    gradebooks = None
    try:
        secret, recorded, full = work / "secret", work / "recorded.pickle", work / "class" / "course"
        if not recorded.exists():  # (a kept folder is reused: the recording and the class are made once)
            secret.write_text(os.urandom(32).hex() + "\n")
            secret.chmod(0o600)
            start = time.perf_counter()
            recorded.write_bytes(pickle.dumps(record_sample(work, secret)))
            print(f"Recorded the results of a sandboxed grading of one student of each kind in "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
        pristine = work / "class" / "released.db"  # the gradebook as released, before any run
        if not pristine.is_file() or len(os.listdir(full / "submitted")) != args.students:
            set_aside(full.parent, work)
            start = time.perf_counter()
            kit.make_course(full)
            shutil.copy(full / "gradebook.db", pristine)
            bench_scale.generate(full, args.students)
            print(f"Generated {args.students} students x {len(kit.NOTEBOOKS)} notebooks in "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
        print(f"{os.cpu_count()} cores, shared with other work: every figure is inflated by that load (see the load "
              "average beside each row)", flush=True)
        codes = {**({} if "tree" in args.skip else {"this tree": None}),
                 **{c: Path(c) if Path(c).is_dir() else grader_at(c, work / f"grader-{c}") for c in args.compare}}
        gradebooks = Gradebooks(work, pristine, "postgresql" in kinds)
        if "sweep" not in args.skip:
            sweep_course = subset(full, work / "sweep" / "course", args.sweep_students, work)
            sweep(gradebooks, kinds, sweep_course, recorded, [int(w) for w in args.workers.split(",")], args.job_s,
                  secret, codes)
            set_aside(sweep_course.parent, work)
        if "class" not in args.skip:
            whole_class(gradebooks, kinds, full, recorded, secret, codes)
        if "memory" not in args.skip:
            memory(gradebooks, full, work, [int(n) for n in args.sizes.split(",")], recorded, secret, codes)
    finally:
        if gradebooks is not None:
            gradebooks.close()
        shutil.rmtree(work / "set-aside", ignore_errors=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(json.loads(sys.argv[2]))
    else:
        main()
