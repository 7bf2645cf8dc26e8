"""A two-machine-shaped run (a measurement and a check, not a test): the coordinating "machine" (this
checkout: the course, the secret, the gradebook, the Dask scheduler, the grading command) and a worker
"machine" (a separate clone of the same commit, its own folder and processes: `dask worker` started
there with that clone on PYTHONPATH), on loopback. The same generated class is graded that way and by
this checkout's local threads; every grade, message and named mistake, and the class's tables, must be
the same. Printed: wall time and notebooks/s of each, and whether they agree.

Commit first: the worker's clone is made from HEAD, and a worker whose grader differs from the
coordinator's (uncommitted changes here) takes no job.

    .venv/bin/python bench/bench_two_machines.py [--students 40] [--workers 2] [--keep DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from submissions import classroom, kit  # noqa: E402  (the test suite's submission builders)

spec = importlib.util.spec_from_file_location("services", ROOT / "scripts" / "services.py")
services = importlib.util.module_from_spec(spec)
spec.loader.exec_module(services)


def scheduler_here(log: Path) -> tuple[subprocess.Popen, str]:
    """The coordinating machine's scheduler (this checkout), on loopback, as scripts/services.py starts it."""
    port = services._free_port()
    env = {**kit.env(), "PYTHONPATH": str(ROOT)}
    with open(log, "w") as out:
        proc = subprocess.Popen([str(kit.BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                 "--no-dashboard", "--preload", "mha_grader.trusted.cluster"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    services._wait("the Dask scheduler", lambda: services._listening(port), proc, log)
    return proc, f"tcp://127.0.0.1:{port}"


def worker_machine(clone: Path, scheduler: str, workers: int, log: Path) -> subprocess.Popen:
    """`dask worker` run from ``clone`` (its own code on PYTHONPATH), as on another machine."""
    env = {**kit.env(), "PYTHONPATH": str(clone)}
    env.pop("MHA_GRADER_SECRET", None)  # a worker needs no secret
    with open(log, "w") as out:
        return subprocess.Popen([str(kit.BIN / "dask"), "worker", scheduler, "--host", "127.0.0.1",
                                 "--nworkers", str(workers), "--nthreads", "1", "--no-dashboard",
                                 "--preload", "mha_grader.trusted.cluster"], cwd=clone, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def grade(course: Path, secret: Path, *options: str) -> tuple[float, str]:
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret), "PYTHONPATH": str(ROOT)}
    env.pop("MHA_GRADER_DB_URL", None)
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "mha_grader", "--course", str(course), "grade", *options],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if run.returncode not in (0, 1):
        sys.exit(f"grading failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return wall, run.stdout + run.stderr


def outcome(course: Path) -> dict:
    """{student/notebook: (gradebook scores, stored tests and notes)}: everything a grade is."""
    from nbgrader.api import Gradebook
    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "default_course") as gb:
        for submission in gb.assignment_submissions(kit.ASSIGNMENT):
            for nb in submission.notebooks:
                stored = json.loads((course / "autograded" / submission.student.id / kit.ASSIGNMENT /
                                     f"{nb.name}.result.json").read_text())
                out[f"{submission.student.id}/{nb.name}"] = (
                    sorted((g.name, g.auto_score) for g in nb.grades),
                    [(t["id"], t["score"], t["message"], t.get("mistake")) for t in stored["tests"]], stored["notes"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="worker processes on the worker machine")
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-two-machines-"))
    work.mkdir(parents=True, exist_ok=True)
    scheduler_proc = worker = None
    try:
        clone = work / "worker-machine"
        shutil.rmtree(clone, ignore_errors=True)
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout
        course = kit.make_course(work / "course")
        classroom.generate(course, args.students)
        secret = work / "secret"
        secret.write_text(os.urandom(32).hex() + "\n")
        secret.chmod(0o600)
        threads_course, dask_course = work / "threads", work / "two-machines"
        for copy in (threads_course, dask_course):
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(course, copy)

        scheduler_proc, scheduler = scheduler_here(work / "scheduler.log")
        worker = worker_machine(clone, scheduler, args.workers, work / "worker-machine.log")
        from distributed import Client
        with Client(scheduler, timeout="30s") as client:
            client.wait_for_workers(args.workers, timeout=300)

        notebooks = args.students * len(kit.NOTEBOOKS)
        threads_s, _ = grade(threads_course, secret, "--workers", str(args.workers))
        dask_s, log = grade(dask_course, secret, "--scheduler", scheduler)
        same = outcome(threads_course) == outcome(dask_course) and len(outcome(dask_course)) == notebooks
        tables = all((threads_course / t).read_text() == (dask_course / t).read_text()
                     for t in ("grades_by_student.csv", "mistakes.csv", "tests.csv"))
        print(f"{args.students} students x {len(kit.NOTEBOOKS)} notebooks; worker machine: a clone of {head.strip()} "
              f"in {clone}, {args.workers} worker process(es) of 1 thread; load average {os.getloadavg()[0]:.1f} (the machine is shared)\n")
        print("| run | wall (s) | notebooks/s |\n|---|---:|---:|")
        print(f"| local threads ({args.workers} workers) | {threads_s:.1f} | {notebooks / threads_s:.1f} |")
        print(f"| scheduler here, workers from the other clone | {dask_s:.1f} | {notebooks / dask_s:.1f} |")
        print(f"\nSame grades, messages and mistakes for all {notebooks} notebooks: {'yes' if same else 'NO'}; "
              f"same grades_by_student.csv, mistakes.csv, tests.csv: {'yes' if tables else 'NO'}.")
        refused = [line for line in log.splitlines() if "takes no job" in line]
        if refused:
            print("Workers refused: " + "; ".join(refused))
    finally:
        for proc in (worker, scheduler_proc):  # each leads a session of its own: its whole group is stopped
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=120)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
