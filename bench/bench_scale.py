"""Scale benchmark (a measurement, not a test): a class of 1,000 students x every notebook of the course, graded end to
end by `make grade` on this machine, measured (not projected), with stock nbgrader on a sample.

The class is generated as tests/submissions/classroom.py deals it (most answers right; per student one
notebook a classic mistake or a quick hostile trick, in turn); each kind of student is built once and
its files copied. Then `make grade COURSE=<class>` runs as an instructor runs it (the grader with its
default workers, then `nbgrader export`). Printed:

* the total wall time of `make grade`, and notebooks per second;
* the coordinating process's cost per notebook (recording: gradebook, stored result, feedback files,
  stamps), wall and CPU, as the run itself measures it;
* the per-notebook floor beside it: the time the sandboxes took (summed over the notebooks) divided
  by the number of workers (no more sandboxes than workers run at once), per notebook: what a notebook
  would cost if judging, feedback and recording cost nothing;
* stock serial `nbgrader autograde` on a sample of the same class (bench/bench_class.py's stock course,
  which has the five notebooks of its commit: it grades those and skips the others), per notebook graded
  (stock's over its five, ours over all: the ratio errs against us).

The machine may be shared: the load average is printed beside each phase.

    .venv/bin/python bench/bench_scale.py [--students 1000] [--stock-students 4] [--keep DIR]
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
sys.path.insert(0, str(ROOT / "bench"))
import bench_class  # noqa: E402  (its stock course and timing helpers)
from submissions import classroom, kit  # noqa: E402  (the test suite's submission builders)

from mha_grader.trusted import cli  # noqa: E402  (the default workers)

GOAL_S_PER_1000 = 12  # wall seconds per 1,000 notebooks (the goal: 1,000 students x 5 notebooks in under a minute)


def generate(course: Path, students: int) -> int:
    """Write the class into course/submitted/, each kind of student built once; returns the files written."""
    kinds = classroom.recipes(kit.NOTEBOOKS)
    built: dict[int, dict[str, bytes]] = {}
    written = 0
    for i in range(students):
        k = i % len(kinds)
        kind, recipe = kinds[k]
        if k not in built:
            files = classroom.student_files(course, kind, recipe, kit.NOTEBOOKS)
            built[k] = {n: (json.dumps(c, indent=1).encode() if isinstance(c, dict) else
                            c if isinstance(c, bytes) else c.encode()) for n, c in files.items()}
        label = recipe.student if kind == "mutant" else recipe if kind == "hostile" else "correct"
        folder = course / "submitted" / f"s{i:04d}_{label}"[:60] / kit.ASSIGNMENT
        folder.mkdir(parents=True)
        for name, content in built[k].items():
            (folder / f"{name}.ipynb").write_bytes(content)
            written += 1
    return written


def make_grade(course: Path, secret: Path) -> tuple[float, str, str, list[tuple[str, float]]]:
    """(wall seconds, load before -> after, output, [(phase, seconds)]) of `make grade COURSE=course`,
    run from the repository; each output line is timed as it arrives, for the phases."""
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret)}
    env.pop("MHA_GRADER_DB_URL", None)
    before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(["make", "--no-print-directory", "grade", f"COURSE={course}", "ARGS=--timing"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.perf_counter() - start, line) for line in proc.stdout]
    wall = time.perf_counter() - start
    if proc.wait() not in (0, 1):
        sys.exit("make grade failed:\n" + "".join(line for _, line in lines[-40:]))
    planning = next((t for t, line in lines if line.startswith("mha_grader: reading the course and planning")), 0.0)
    grading = next((t for t, line in lines if line.startswith("grading ") and "notebook(s)" in line), planning)
    phase = float(next(re.search(r"Grading took ([\d.]+) s", line).group(1) for _, line in lines
                       if "Grading took" in line))
    phases = [("start-up, fork servers, probe", planning), ("reading the class and planning the jobs", grading - planning),
              ("grading (sandbox, judge, recording)", phase),
              ("summary, CSV files, class report, nbgrader export", wall - grading - phase)]
    return wall, f"{before:.1f} -> {os.getloadavg()[0]:.1f}", "".join(line for _, line in lines), phases


def floor_per_notebook(course: Path, workers: int) -> tuple[float, int]:
    """(seconds per notebook if the workers' sandboxes never paused, notebooks that ran a sandbox)."""
    seconds = [json.loads(p.read_text())["sandbox_s"] for p in (course / "autograded").glob("*/*/*.result.json")]
    return sum(seconds) / workers / max(len(seconds), 1), sum(s > 0 for s in seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--stock-students", type=int, default=4, help="the sample stock nbgrader grades")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(work, args.students, args.stock_students)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, students: int, stock_students: int) -> None:
    start = time.perf_counter()
    course = kit.make_course(work / "course")
    notebooks = generate(course, students)
    print(f"Generated {students} students x {len(kit.NOTEBOOKS)} notebooks ({notebooks} files) in "
          f"{time.perf_counter() - start:.0f} s, in {course}", flush=True)
    secret = work / "secret"
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)

    print("make grade (the grader with its default workers, then nbgrader export) ...", flush=True)
    wall, load, out, phases = make_grade(course, secret)
    phase = float(re.search(r"Grading took ([\d.]+) s", out).group(1))
    cost = re.search(r"in this process: recording ([\d.]+) ms \(CPU ([\d.]+) ms\); all its CPU ([\d.]+) ms", out)
    workers = cli.default_workers()  # (what `make grade` ran with)
    floor, sandboxed = floor_per_notebook(course, workers)
    graded = len(list((course / "autograded").glob("*/*/*.result.json")))
    assert graded == notebooks, f"{graded} of {notebooks} notebooks were graded"
    assert (course / "grades.csv").is_file(), "nbgrader export wrote no grades.csv"

    print(f"(stock) nbgrader autograde, serial, on a sample of {stock_students} students ...", flush=True)
    stock = bench_class.stock_course(work / "stock")
    for folder in sorted((course / "submitted").iterdir())[:stock_students]:
        shutil.copytree(folder, stock / "submitted" / folder.name)
    stock_wall, stock_load, _ = bench_class.timed([str(kit.BIN / "nbgrader"), "autograde", kit.ASSIGNMENT],
                                                  stock, kit.env())
    sample = bench_class.stock_graded(stock)

    print(f"\n{students} students x {len(kit.NOTEBOOKS)} notebooks = {notebooks} notebooks; {os.cpu_count()} cores, "
          f"{workers} workers; load average before -> after each phase (the machine may be shared)\n")
    print("| what | notebooks | wall (s) | notebooks/s | s per notebook | load |\n|---|---:|---:|---:|---:|---|")
    print(f"| `make grade` (ours, end to end: plan, sandbox, judge, record, summary, nbgrader export) | {notebooks} | "
          f"{wall:.1f} | {notebooks / wall:.1f} | {wall / notebooks:.3f} | {load} |")
    print(f"| ... its grading phase alone | {notebooks} | {phase:.1f} | {notebooks / phase:.1f} | "
          f"{phase / notebooks:.3f} | |")
    print(f"| stock `nbgrader autograde`, serial, a sample | {sample} | {stock_wall:.1f} | {sample / stock_wall:.2f} | "
          f"{stock_wall / sample:.3f} | {stock_load} |")
    print("\n| phase of `make grade` | wall (s) |\n|---|---:|")
    for name, seconds in phases:
        print(f"| {name} | {seconds:.1f} |")
    goal = GOAL_S_PER_1000 * notebooks / 1000
    print(f"\nTotal: {wall:.0f} s = {wall / 60:.1f} min for {notebooks} notebooks (goal < {goal:.0f} s, {GOAL_S_PER_1000} s "
          f"per 1,000 notebooks: {'met' if wall < goal else 'NOT met'}); {(stock_wall / sample) / (wall / notebooks):.1f}x "
          "faster than stock per notebook.")
    print(f"Coordinator per notebook: recording {cost.group(1)} ms wall, {cost.group(2)} ms CPU (goal <= 5 ms); "
          f"the coordinating process's CPU in all (its worker threads' judge and feedback rendering included): "
          f"{cost.group(3)} ms.\nPer-notebook floor (the sandboxes' time / {workers} workers): "
          f"{floor * 1000:.0f} ms; measured wall per notebook in the grading phase: {phase / notebooks * 1000:.0f} ms.")
    print(f"({sandboxed} of {notebooks} notebooks ran a sandbox; the rest were decided before one: not handed in, "
          "unreadable, or refused by the static rule.)")


if __name__ == "__main__":
    main()
