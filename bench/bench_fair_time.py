"""Fair-time benchmark (a measurement, not a test): the same marks on a quiet, a busy and a paused machine.

One class of --students students (default 100, more when the catalogues need them), each handing in every
notebook of the assignment, holding every kind of answer the test corpora hold (tests/submissions/every_kind.large:
right answers, every mutant, hostile, untrusted and waiting submission, the honest corpus, the ready-made
routes but those that corrupt memory), endless loops and sleeps included, graded with the static rule
off (the rule admits no code that sleeps; the time limits beneath it must hold), three times:

  (a) quiet: the local threads, 2 workers;
  (b) busy: the same, beside noisy neighbours started here (tests/neighbours.py: --neighbours sessions of 8
      busy processes, un-niced; the grading starts once the load average is 30), stopped after;
  (c) paused: on Dask (scripts/services.py: a scheduler and 2 workers on loopback, worker-ttl 15 s), the worker
      process that holds a job SIGSTOPped for --stop seconds (default 90) once a third of the class is
      graded, then SIGCONTed (Dask's nanny has usually killed and restarted it by then).

It prints a table: wall time, load average (lowest and highest 1-minute average during the grading),
notebooks graded and not graded, and whether every grade, feedback page, autograded notebook, CSV and
class report is byte-identical to (a); for (c), when the run named the stopped worker and when the scheduler
dropped it, counted from the stop.

    .venv/bin/python bench/bench_fair_time.py [--students 100] [--stop 90] [--neighbours 8]
        [--test-seconds 10 --notebook-seconds 60] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from neighbours import Neighbours  # noqa: E402  (the test suite's noisy neighbours and class builder)
from submissions import every_kind, kit  # noqa: E402

SERVICES = ROOT / "scripts" / "services.py"


def grader(course: Path, limits: list[str], *options: str) -> list[str]:
    return [sys.executable, str(kit.WITHOUT_RULE), "--course", str(course), "grade", "--workers", "2", *limits, *options]


def env(course: Path) -> dict:
    secret = course.parent / "course.secret"
    if not secret.exists():
        secret.write_text("0123456789abcdef" * 4 + "\n")
        secret.chmod(0o600)
    return kit.grader_env(secret)


def graded(out: str) -> tuple[int, int]:
    """(notebooks graded, notebooks that could not be graded) as the run's summary says."""
    done = re.search(r"This run graded (\d+) notebook", out)
    failed = re.search(r"(\d+) could not be graded", out)
    return int(done.group(1)) if done else 0, int(failed.group(1)) if failed else 0


def quiet(course: Path, limits: list[str]) -> dict:
    start, load = time.monotonic(), os.getloadavg()[0]
    run = subprocess.run(grader(course, limits), env=env(course), capture_output=True, text=True)
    return {"seconds": time.monotonic() - start, "load": (load, os.getloadavg()[0]), "out": run.stdout,
            "status": run.returncode}


def busy(course: Path, limits: list[str], neighbours: int) -> dict:
    with Neighbours(sessions=neighbours, processes=8) as noisy:
        waited = noisy.wait_for_load(30)
        mark, start = noisy.mark(), time.monotonic()
        run = subprocess.run(grader(course, limits), env=env(course), capture_output=True, text=True)
        seconds, load = time.monotonic() - start, noisy.load(since=mark)
    return {"seconds": seconds, "load": load, "out": run.stdout, "status": run.returncode, "warm-up": waited}


def paused(course: Path, limits: list[str], stop_s: float, folder: Path) -> dict:
    from distributed import Client
    script = [sys.executable, str(SERVICES)]
    started = subprocess.run([*script, "start", str(folder), "--dask-workers", "2", "--worker-preload",
                              str(kit.WITHOUT_RULE)], capture_output=True, text=True, timeout=300)
    if started.returncode:
        sys.exit(f"the Dask services did not start:\n{started.stdout}{started.stderr}")
    scheduler, seen = json.loads(started.stdout)["scheduler"], {}
    try:
        with Client(scheduler, timeout="30s") as client, open(folder / "grader.err", "w+") as err:
            pids = client.run(os.getpid)
            start, load = time.monotonic(), os.getloadavg()[0]
            run = subprocess.Popen(grader(course, limits, "--scheduler", scheduler), env=env(course),
                                   stdout=subprocess.PIPE, stderr=err, text=True)
            students = len(list((course / "submitted").iterdir()))
            victim = holder(client, course, run, students // 3)
            os.kill(pids[victim], signal.SIGSTOP)
            stopped = time.monotonic()
            while time.monotonic() - stopped < stop_s:
                said(folder / "grader.err", victim, seen, stopped)
                time.sleep(0.5)
            try:
                os.kill(pids[victim], signal.SIGCONT)
            except ProcessLookupError:
                seen["killed"] = True  # (Dask's nanny killed it while it was stopped, and started another)
            while run.poll() is None:
                said(folder / "grader.err", victim, seen, stopped)
                time.sleep(0.5)
            out = run.stdout.read()
    finally:
        subprocess.run([*script, "stop", str(folder)], capture_output=True, timeout=300)
    return {"seconds": time.monotonic() - start, "load": (load, os.getloadavg()[0]), "out": out,
            "status": run.returncode, "victim": victim, **seen}


def holder(client, course: Path, run: subprocess.Popen, want: int) -> str:
    """A worker that holds a job of the run, once ``want`` students have their feedback."""
    while run.poll() is None:
        done = len({p.parts[-3] for p in (course / "feedback").glob("*/mha/*.html")})
        holding = [w for w, keys in client.processing().items() if any(str(k).startswith("mha-grade/") for k in keys)]
        if done >= want and holding:
            return holding[0]
        time.sleep(0.2)
    sys.exit("the run ended before a third of the class was graded")


def said(log: Path, victim: str, seen: dict, since: float) -> None:
    for key, words in (("named", "has not answered the scheduler"), ("dropped", "dropped by the scheduler")):
        if key not in seen and any(victim in line and words in line for line in log.read_text().splitlines()):
            seen[key] = time.monotonic() - since


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--stop", type=float, default=90, help="seconds the worker is stopped in (c)")
    parser.add_argument("--neighbours", type=int, default=8, help="busy sessions of 8 processes in (b)")
    parser.add_argument("--test-seconds", default="10")
    parser.add_argument("--notebook-seconds", default="60")
    parser.add_argument("--keep", type=Path, help="keep the courses in this folder")
    args = parser.parse_args()
    limits = ["--test-seconds", args.test_seconds, "--notebook-seconds", args.notebook_seconds]
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-fair-"))
    course = kit.make_course(base / "a" / "course")
    students = every_kind.large(course, args.students)
    for copy in ("b", "c"):
        shutil.copytree(base / "a", base / copy, symlinks=True)
    print(f"{len(students)} students x {len(kit.NOTEBOOKS)} notebooks, limits {' '.join(limits)}; "
          f"{os.cpu_count()} cores", flush=True)
    runs = {"(a) quiet": quiet(base / "a" / "course", limits)}
    print("(a) done", flush=True)
    runs["(b) busy"] = busy(base / "b" / "course", limits, args.neighbours)
    print("(b) done", flush=True)
    runs[f"(c) Dask, a worker stopped {args.stop:g} s"] = paused(base / "c" / "course", limits, args.stop, base / "dask")
    reference = every_kind.outputs(base / "a" / "course")
    scores = kit.scores(base / "a" / "course")
    print(f"\n| run | wall s | load average | graded | not graded | exit | identical to (a) |\n|---|---|---|---|---|---|---|")
    for (name, run), folder in zip(runs.items(), "abc"):
        mine = base / folder / "course"
        differ = every_kind.differences(every_kind.outputs(mine), reference)
        same = "yes" if not differ and kit.scores(mine) == scores else f"no: {len(differ)} file(s), e.g. {differ[:2]}"
        done, failed = graded(run["out"])
        print(f"| {name} | {run['seconds']:.0f} | {run['load'][0]:.1f}-{run['load'][1]:.1f} | {done} | {failed} | "
              f"{run['status']} | {same} |")
    c = runs[f"(c) Dask, a worker stopped {args.stop:g} s"]
    print(f"\n(b) the load reached 30 after {runs['(b) busy']['warm-up']:.0f} s of warm-up. (c) stopped {c['victim']}: "
          f"named on the terminal after {c.get('named', -1):.0f} s, dropped by the scheduler after "
          f"{c.get('dropped', -1):.0f} s{' (its nanny killed it)' if c.get('killed') else ''}; (c) took "
          f"{c['seconds'] - runs['(a) quiet']['seconds']:+.0f} s against (a).")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
