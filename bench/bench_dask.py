"""Dask overhead benchmark (a measurement, not a test): the same generated class graded by the local
threads backend (`grade --workers 2`) and by Dask (`grade --scheduler local`: a LocalCluster of 2
worker processes of 1 thread, started by the run), in interleaved rounds on this machine.

Overhead = Dask's wall time per notebook over the threads backend's, on the same class and machine.
Each ``--compare COMMIT`` adds a mode: the grader as it was at COMMIT (its `mha_grader` and
`mha_checks`, exported with `git archive`) with `--scheduler local` too: say the last commit with one
Dask task per notebook, against this tree's one task per student.

Each run grades every notebook (`--force`). One row per run: the command's wall time, its grading
phase, Dask's connection inside it (cluster start included), the load average, "sandboxes busy" (the
time after the connection the workers' sandboxes ran, the results' "sandbox_s" summed, over workers x
(phase - connection): each mode runs as many sandboxes at once as it has workers), and three figures per
notebook: the command's wall time; the steady rate (between the 10th and the 90th percentile of the
results' recording times, per result in between: start-up and stragglers left out, what a long class or
a long-lived cluster pays); and "other", the workers' time with no sandbox running (judging, feedback
pages, Dask's traffic, waiting, warm-up: the threads backend judges in a thread of its own while the
sandboxes run, a Dask worker between them), which other load on the machine inflates less.
Then, per mode, the median of each, and Dask's overhead: the median over the rounds of each run's
ratio to the threads run of the same round. The machine may be shared: rounds are interleaved (the
order rotates each round) and the load is printed.

    .venv/bin/python bench/bench_dask.py [--students 60] [--rounds 3] [--compare COMMIT ...] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
import bench_class  # noqa: E402  (timing helpers)
from submissions import classroom, kit  # noqa: E402  (the test suite's submission builders)

WORKERS = 2


def grader_at(commit: str, dest: Path) -> Path:
    """The grader (mha_grader, mha_checks) as it was at ``commit``, in ``dest``."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "mha_grader", "mha_checks"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def grade(code: Path, course: Path, secret: Path, *options: str) -> dict:
    """One timed run of the grader in ``code`` on ``course``: wall, grading phase, connection (s), load."""
    env = {**kit.env(), "MHA_GRADER_SECRET": str(secret), "PYTHONPATH": str(code)}
    env.pop("MHA_GRADER_DB_URL", None)
    wall, load, out = bench_class.timed([sys.executable, "-m", "mha_grader", "--course", str(course), "grade",
                                         "--force", *options], code, env)
    phase = float(re.search(r"Grading took ([\d.]+) s", out).group(1))
    connect = re.search(r"connected in ([\d.]+) s", out)
    connect = float(connect.group(1)) if connect else 0.0
    results = list((course / "autograded").glob(f"*/{kit.ASSIGNMENT}/*.result.json"))
    sandboxed = sum(r.get("sandbox_s", r["seconds"]) for r in map(json.loads, map(Path.read_text, results)))
    worker_s = WORKERS * (phase - connect)  # (a grader before sandbox_s: its judging counts as sandbox time)
    return {"wall": wall, "phase": phase, "connect": connect, "load": load, "steady": steady(results),
            "busy": sandboxed / worker_s, "other": (worker_s - sandboxed) / len(results)}


def steady(results: list[Path]) -> float:
    """Seconds per result between the 10th and the 90th percentile of the results' recording times."""
    times = sorted(p.stat().st_mtime for p in results)
    first, last = len(times) // 10, len(times) - 1 - len(times) // 10
    return (times[last] - times[first]) / (last - first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", metavar="COMMIT", action="append", default=[],
                        help="also Dask with the grader at COMMIT (repeatable)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-dask-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(work, args.students, args.rounds, args.compare)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, students: int, rounds: int, compare: list[str]) -> None:
    course = kit.make_course(work / "course")
    classroom.generate(course, students)
    notebooks = students * len(kit.NOTEBOOKS)  # a notebook not handed in is a job too
    secret = work / "secret"
    secret.write_text("0123456789abcdef" * 4 + "\n")
    secret.chmod(0o600)
    local = ["--scheduler", "local", "--workers", str(WORKERS)]
    modes = {"threads": (ROOT, ["--workers", str(WORKERS)]), "dask": (ROOT, local)}
    for commit in compare:
        modes[f"dask@{commit}"] = (grader_at(commit, work / f"at-{commit}"), local)
    for name in modes:
        shutil.copytree(course, work / name)
    print(f"{students} students x {len(kit.NOTEBOOKS)} notebooks = {notebooks} jobs per run; {rounds} round(s), "
          f"order rotating\n", flush=True)
    print("| round | mode | wall (s) | grading phase (s) | connect (s) | wall / notebook (ms) | "
          "steady / notebook (ms) | sandboxes busy | other / notebook (ms) | load |\n"
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|", flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in modes}
    names = list(modes)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            code, options = modes[name]
            t = grade(code, work / name, secret, *options)
            t["per_notebook"] = t["wall"] / notebooks
            runs[name].append(t)
            print(f"| {r + 1} | {name} | {t['wall']:.1f} | {t['phase']:.1f} | {t['connect']:.1f} | "
                  f"{t['per_notebook'] * 1000:.0f} | {t['steady'] * 1000:.0f} | "
                  f"{t['busy'] * 100:.0f} % | {t['other'] * 1000:.0f} | {t['load']} |", flush=True)
    graded = {name: bench_class.scores(work / name) for name in modes}
    assert all(g == graded["threads"] for g in graded.values()) and len(graded["threads"]) == students, \
        "the modes disagree, or a student was not graded"
    print("\nPer notebook, the median over the rounds; and Dask's overhead: the median over the rounds of each "
          "run's ratio to the threads run of the same round (the load moves between rounds; goal: < 5 %):\n")
    print("| mode | wall / notebook (ms) | overhead (wall) | steady / notebook (ms) | overhead (steady) | "
          "other / notebook (ms) |\n|---|---:|---:|---:|---:|---:|")
    for name, ts in runs.items():
        figures = [f"{statistics.median(t[k] for t in ts) * 1000:.0f} | "
                   f"{statistics.median(t[k] / b[k] - 1 for t, b in zip(ts, runs['threads'])) * 100:+.1f} %"
                   for k in ("per_notebook", "steady")]
        print(f"| {name} | {' | '.join(figures)} | {statistics.median(t['other'] for t in ts) * 1000:.0f} |")


if __name__ == "__main__":
    main()
