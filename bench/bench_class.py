"""Class benchmark (a measurement, not a test): grading a generated class, three ways, in one run.

A class of --students students (default 40), each handing in every notebook of the course (7 today:
280 submissions), most answers right, one notebook per student a classic mistake
(tests/submissions/mutants.py) or a quick hostile trick (tests/submissions/hostile.py), dealt in
turn. The same files are graded

  (a) by our command, `python -m mha_grader grade --workers 2` (sandbox, judge, gradebook, feedback;
      as many sandboxes as (c) has Dask workers, where the default would run 3 on 2 cores);
  (b) by stock serial `nbgrader autograde` on a stock course made from the course as it was at commit
      00cc176 (solutions with their hidden tests inside, and that commit's nbgrader_config.py);
  (c) by our command through a real Dask scheduler with two workers on loopback (scripts/services.py).

Stock's course has the five notebooks of that commit: it grades those and skips the others. So the
ratio to stock is per notebook graded: stock's over its five, ours over all seven, which cost ours
more on average (the ratio errs against us). It prints notebooks per second, that ratio, the Dask
overhead per job against (a), and, from (a)'s cost per student, the projected wall time of 1,000
students on 1, 4 and 16 machines of 2 cores.
The machine may be shared: the load average is printed beside each phase.

    .venv/bin/python bench/bench_class.py [--students 40] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from submissions import classroom, kit  # noqa: E402  (the test suite's submission builders)

STOCK_COMMIT = "00cc176"
CORES = 2


def stock_course(dest: Path) -> Path:
    """The course as stock nbgrader graded it at STOCK_COMMIT (hidden tests inside the notebooks), released."""
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", STOCK_COMMIT, "solutions", "nbgrader_config.py"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(subprocess.run(["git", "show", f"{STOCK_COMMIT}:{name}"], cwd=ROOT, capture_output=True,
                                          check=True).stdout)
    run = kit.nbgrader(dest, "generate_assignment", kit.ASSIGNMENT, "--force")
    assert run.returncode == 0, run.stdout
    return dest


def stock_graded(stock: Path) -> int:
    """How many of the submitted notebooks stock nbgrader grades: those its course has (it skips the others)."""
    known = {p.name for p in (stock / "solutions" / kit.ASSIGNMENT).glob("*.ipynb")}  # (its source notebooks)
    return sum(p.name in known for p in (stock / "submitted").glob(f"*/{kit.ASSIGNMENT}/*.ipynb"))


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, str, str]:
    """(wall seconds, the load average before and after, output) of one command, which must succeed."""
    before = os.getloadavg()[0]
    start = time.perf_counter()
    run = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    if run.returncode not in (0, 1):  # 1: some notebook could not be graded (reported), the rest were
        sys.exit(f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stdout[-3000:]}")
    return wall, f"{before:.1f} -> {os.getloadavg()[0]:.1f}", run.stdout


def ours(course: Path, secret: Path, *options: str) -> tuple[float, str, str]:
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret), "PYTHONPATH": str(ROOT)}
    env.pop("MHA_GRADER_DB_URL", None)
    return timed([sys.executable, "-m", "mha_grader", "--course", str(course), "grade", "--timing", *options], ROOT, env)


def scores(course: Path) -> dict:
    """{student: total}: a sanity check that every run graded the class."""
    return {s: round(sum(sum(g for g in nb.values() if isinstance(g, float)) for nb in per.values()), 3)
            for s, per in kit.scores(course).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-class-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(work, args.students)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, students: int) -> None:
    print(f"Building the class ({students} students x {len(kit.NOTEBOOKS)} notebooks) in {work} ...", flush=True)
    course = kit.make_course(work / "course")
    classroom.generate(course, students)
    submissions = sum(1 for _ in (course / "submitted").glob(f"*/{kit.ASSIGNMENT}/*.ipynb"))
    stock = stock_course(work / "stock")
    shutil.copytree(course / "submitted", stock / "submitted")  # the very same files
    for name in ("local", "dask"):
        shutil.copytree(course, work / name)
    secret = work / "secret"
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)

    print("(a) our command, 2 workers ...", flush=True)
    local = ours(work / "local", secret, "--workers", str(CORES))
    print("(b) stock nbgrader autograde, serial ...", flush=True)
    stock_run = timed([str(kit.BIN / "nbgrader"), "autograde", kit.ASSIGNMENT], stock, kit.env())
    print("(c) our command on a Dask scheduler with 2 workers (scripts/services.py) ...", flush=True)
    services = work / "services"
    started = subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "start", str(services),
                              "--dask-workers", str(CORES)], capture_output=True, text=True)
    try:
        if started.returncode:
            sys.exit(f"services.py start failed:\n{started.stdout}{started.stderr}")
        address = json.loads(started.stdout)["scheduler"]
        dask = ours(work / "dask", secret, "--scheduler", address)
        # The machine is shared: a second round of (a) and (c), alternated, for the overhead of Dask.
        print("(a2) and (c2): both again (--force), for the Dask overhead ...", flush=True)
        again = {"local": ours(work / "local", secret, "--workers", str(CORES), "--force"),
                 "dask": ours(work / "dask", secret, "--scheduler", address, "--force")}
    finally:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "stop", str(services)], check=True)

    graded = {name: scores(work / name) for name in ("local", "dask")}
    assert graded["local"] == graded["dask"], "Dask and local runs disagree"
    assert len(graded["local"]) == students and len(scores(stock)) == students, "a student was not graded"
    report(submissions, students, local, stock_run, stock_graded(stock), dask, again, work)


def recording_cost(graded: Path, scratch: Path) -> float:
    """Seconds the coordinating process spends recording one result, with nothing else running: every
    result of ``graded`` recorded again in a copy (the serial part of a run, whatever the workers)."""
    sys.path.insert(0, str(ROOT))
    from mha_grader.trusted import course as course_mod, feedback, notebooks
    from mha_grader.trusted.gradebook import GradebookWriter
    from mha_grader.trusted.recording import Recorder

    shutil.copytree(graded, scratch)
    course = course_mod.Course(scratch)
    jobs = []
    for path in sorted((scratch / "autograded").glob(f"*/{kit.ASSIGNMENT}/*.result.json")):
        student, name = path.parts[-3], path.name.removesuffix(".result.json")
        submitted = course.folder("submitted", student) / f"{name}.ipynb"
        job = {"student": student, "notebook": name, "path": str(submitted) if submitted.exists() else None,
               "stamp": {"key": "bench"}}
        result = json.loads(path.read_text())
        nb = notebooks.read_submission(submitted)[0] if job["path"] else None
        result["feedback"] = feedback.render(course.releases[name], nb, result, student)  # done by the worker
        jobs.append((job, result))
    writer = GradebookWriter(course.db_url, course.assignment)
    recorder = Recorder(course, writer)
    start = time.perf_counter()
    for job, result in jobs:
        recorder.record(job, result)
    recorder.flush()
    seconds = (time.perf_counter() - start) / len(jobs)
    writer.close()
    return seconds


def report(submissions: int, students: int, local, stock_run, stock_n: int, dask, again: dict, work: Path) -> None:
    """The tables; ``stock_n``: the notebooks stock graded (stock_graded)."""
    stock_wall = stock_run[0]
    rows = [("(a) ours, 2 workers (threads)", local, submissions),
            ("(b) stock nbgrader autograde, serial", stock_run, stock_n),
            ("(c) ours, Dask scheduler + 2 workers", dask, submissions), ("(a2) = (a) again", again["local"], submissions),
            ("(c2) = (c) again", again["dask"], submissions)]
    print(f"\n{submissions} submitted notebooks ({students} students x {len(kit.NOTEBOOKS)}), of which stock graded "
          f"{stock_n} (it skips the notebooks its course lacks); {os.cpu_count()} cores; load average shown "
          "before -> after each phase\n")
    print("| run | notebooks | wall (s) | grading phase (s) | notebooks/s | vs stock, per notebook | load |\n"
          "|---|---:|---:|---:|---:|---:|---|")
    for name, (wall, load, out), graded in rows:
        found = re.search(r"Grading took ([\d.]+) s", out)
        print(f"| {name} | {graded} | {wall:.1f} | {found.group(1) if found else '-'} | {graded / wall:.2f} | "
              f"{(stock_wall / stock_n) / (wall / graded):.2f}x | {load} |")
    jobs = students * len(kit.NOTEBOOKS)  # one job per (student, notebook)

    def phase(out: str) -> float:
        return float(re.search(r"Grading took ([\d.]+) s", out).group(1))

    def connect(out: str) -> float:  # once per run: import Dask, connect, scatter the release
        return float(re.search(r"connected in ([\d.]+) s", out).group(1))

    best_local = min(phase(local[2]), phase(again["local"][2]))
    mean_local = (phase(local[2]) + phase(again["local"][2])) / 2
    best_dask = min(phase(run[2]) - connect(run[2]) for run in (dask, again["dask"]))
    overhead = (best_dask - best_local) / jobs
    per_job = local[0] * CORES / submissions
    print(f"\nDask overhead per job vs local threads (best of two grading phases each, the connection of "
          f"{connect(dask[2]):.1f} s once per run left out): {overhead * 1000:+.0f} ms per job, "
          f"{(best_dask / best_local - 1) * 100:+.1f}% (goal < 5%)")
    phase = {"local": best_local, "dask": best_dask}
    per_student = mean_local * CORES / students  # core-seconds per student (all notebooks): (a) and (a2)
    contended = float(re.search(r"in this process: recording ([\d.]+) ms", local[2]).group(1)) / 1000
    record_s = recording_cost(work / "local", work / "record")
    print(f"Measured cost: {per_job:.2f} core-s per submitted notebook, {per_student:.2f} core-s per student.")
    print(f"The coordinating process records a notebook (gradebook, result, feedback, stamp) in {record_s * 1000:.0f} ms "
          f"alone, {contended * 1000:.0f} ms while sharing the 2 cores with the workers in (a).")
    print(f"\nProjected wall time for 1,000 students ({len(kit.NOTEBOOKS)} notebooks each), machines of {CORES} cores "
          "(Dask beyond one machine, its overhead as measured; never faster than the one recording process, "
          "which is assumed to have a core of its own):")
    print("| machines | workers | projected wall |\n|---:|---:|---:|")
    for machines in (1, 4, 16):
        factor = 1.0 if machines == 1 else max(1.0, phase["dask"] / phase["local"])
        grading = 1000 * per_student / (machines * CORES) * factor
        seconds = max(grading, 1000 * len(kit.NOTEBOOKS) * record_s)
        print(f"| {machines} | {machines * CORES} | {seconds / 60:.1f} min |")
    sandbox = [json.loads(p.read_text())["seconds"] for p in (work / "local" / "autograded").glob("*/*/*.result.json")]
    sandbox = [s for s in sandbox if s > 0]
    if sandbox:
        sandbox.sort()
        print(f"\nPer sandboxed notebook (ours, inside a worker): median {sandbox[len(sandbox) // 2]:.2f} s, "
              f"max {sandbox[-1]:.2f} s over {len(sandbox)}")


if __name__ == "__main__":
    main()
