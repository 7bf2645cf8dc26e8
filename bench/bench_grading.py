"""Grading cost per notebook (a measurement, not a test): the sandboxed grader against the floor
and against stock `nbgrader autograde`, in one run.

For each exercise notebook, solved with the reference answer:

* floor: the least any grader can spend: a fresh interpreter importing what the notebook needs
  (numpy; numpy + torch for 05) plus the test work itself (the student's cells, every hidden
  case called and judged), measured in this process;
* sandboxed: what `python -m mha_grader grade` spends on it (judging.grade_notebook: a sandbox
  forked from a warm fork server, the harness, the judge outside). The servers' start (one with
  numpy, one with torch too), paid once per grading run (per Dask worker), is measured apart;
* no sandbox: the same program started as a fresh interpreter with no isolation at all
  (--unsafe-no-sandbox): what a notebook costs without the fork server;
* stock: what plain `nbgrader autograde` spends on the same notebook inside one batch (from its
  timestamped log), on the course as it was before the grader (bench/stock.py);
* rule: what the ready-made rule (mha_checks.admission.admit, part of "sandboxed") spends on the
  notebook's program in the trusted process; its first call, which imports the admitted modules
  (torch among them) to resolve names, is measured apart.

Then what the sandbox's kernel-side protections add per job: a job of one trivial test, run in
turn with every protection and with one of them off (the system-call filter, the job's cgroup, the
fresh keyring), interleaved so that the machine's load falls alike on each.

Medians of --repeat runs, seconds.  .venv/bin/python bench/bench_grading.py [--repeat 3]
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
import stock  # noqa: E402
from submissions import kit  # noqa: E402

from mha_checks import admission, calling, judge  # noqa: E402
from mha_checks.hidden import hidden_cases  # noqa: E402
from mha_grader.trusted import judging, notebooks, secret  # noqa: E402
from mha_grader.walls import sandbox  # noqa: E402

KEY = b"0123456789abcdef" * 4
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\|(.*)$")


def cases_of(release) -> dict:
    return {g.id: hidden_cases(g.id, secret.rng(KEY, "mha", release.name, g.id)) for g in release.grade_cells}


def interpreter_and_imports(modules: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-c", f"import {modules}"], check=True)
    return time.perf_counter() - start


def test_work(release, nb: dict, cases: dict) -> float:
    """The student's cells, then every hidden case called and judged, in this (warm) process."""
    prog = notebooks.program(release, nb)
    start = time.perf_counter()
    namespace: dict = {"__name__": "__main__"}
    for cell in prog.cells:
        exec(compile(cell["source"], "<cell>", "exec"), namespace)
    for grade_cases in cases.values():
        for case in grade_cases:
            outcome = calling.call(namespace[case.function], list(case.names), case.specs())
            assert judge.judge(case, outcome).passed
    return time.perf_counter() - start


def rule(release, nb: dict) -> float:
    """The ready-made rule on the notebook's cells as the grader reads them (what each test reaches,
    judged; the cells to run, selected)."""
    cells = notebooks.program(release, nb).cells
    calls = {g.id: {c.function for c in cases} for g, cases in cases_of(release).items()}
    start = time.perf_counter()
    assert admission.admit(cells, calls, trusted=len(release.setup)).refused == {}
    return time.perf_counter() - start


def one_off_costs() -> dict[str, float]:
    """Seconds the first NumPy job and the first torch job spend starting their fork server: each
    beyond what the same job costs once its server is warm."""
    def job(torch: bool) -> float:
        start = time.perf_counter()
        sandbox.run({"torch": torch, "cells": [], "tests": []})
        return time.perf_counter() - start
    first, warm = job(False), job(False)
    first_torch, warm_torch = job(True), job(True)
    return {"server": first - warm, "torch": first_torch - warm_torch}


def hardening_costs(jobs: int) -> dict[str, float]:
    """Seconds: a trivial sandboxed job with everything, and each protection's cost per job (with it,
    less without it), minima of ``jobs`` interleaved runs each (the runs the machine's other load
    disturbed least); the job's cgroup's own setup and removal (timed by the fork server, median);
    one system call under the filter."""
    trivial = {"torch": False, "cells": [{"label": "c", "source": "def f():\n    return 1\n"}],
               "tests": [{"id": "t", "cases": [{"function": "f", "names": [], "specs": []}]}]}
    variants = {"all": sandbox.Hardening(), "seccomp filter": sandbox.Hardening(seccomp=False),
                "cgroup": sandbox.Hardening(cgroup=False), "fresh keyring": sandbox.Hardening(keyring=False)}
    sandbox.run(trivial)  # (the server's start is not a job's cost)
    seconds, cgroup = {name: [] for name in variants}, []
    for _ in range(jobs):
        for name, hardening in variants.items():
            start = time.perf_counter()
            report = sandbox.run(trivial, hardening=hardening)
            seconds[name].append(time.perf_counter() - start)
            cgroup += [report.usage["overhead_s"]] if "overhead_s" in report.usage else []
    least = {name: min(s) for name, s in seconds.items()}
    return {"job": least["all"], **{name: least["all"] - least[name] for name in variants if name != "all"},
            "cgroup itself": statistics.median(cgroup), "per call": syscall_cost()}


def syscall_cost(calls: int = 200_000, runs: int = 7) -> float:
    """Seconds one system call (getpid, which the allowlist admits) costs more under the filter: the fastest
    of ``runs`` timings inside a sandbox with it, less the fastest without it, per call."""
    timing = {"torch": False, "cells": [{"label": "c", "source": (
        "import os, time\ndef f():\n    start = time.perf_counter()\n"
        f"    for _ in range({calls}):\n        os.getpid()\n    return time.perf_counter() - start\n")}],
        "tests": [{"id": "t", "cases": [{"function": "f", "names": [], "specs": []}]}]}

    def seconds(hardening) -> float:
        report = sandbox.run(timing, hardening=hardening)
        return calling.decode(next(r["outcome"]["result"] for r in report.records if "outcome" in r))
    runs_of = {True: [], False: []}
    for _ in range(runs):
        for on in runs_of:
            runs_of[on].append(seconds(sandbox.Hardening(seccomp=on)))
    return (min(runs_of[True]) - min(runs_of[False])) / calls


def stock_batch(course: Path) -> dict[str, float]:
    """One stock autograde batch, one student per notebook: {notebook: seconds in the batch}."""
    for n in kit.NOTEBOOKS:
        kit.submit(course, f"bench_{n}", {n: kit.filled(course, n)})
    fmt = "%(asctime)s.%(msecs)03d|%(message)s"
    run = stock.nbgrader(course, "autograde", "mha", "--force", f"--Application.log_format={fmt}",
                         "--Application.log_datefmt=%Y-%m-%d %H:%M:%S")
    end = time.time()
    marks = [(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp(), Path(m.group(2).split()[-1]).stem)
             for m in map(STAMP.match, run.stdout.splitlines()) if m and m.group(2).startswith("Sanitizing ")]
    return {nb: (marks[i + 1][0] if i + 1 < len(marks) else end) - t for i, (t, nb) in enumerate(marks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=40, help="trivial jobs per protection measured")
    args = parser.parse_args()
    rows = {n: {k: [] for k in ("floor", "sandboxed", "no sandbox", "stock", "rule")} for n in kit.NOTEBOOKS}
    with tempfile.TemporaryDirectory() as tmp:
        course = kit.make_course(Path(tmp) / "course")
        stock_course = stock.make_stock_course(Path(tmp) / "stock")
        releases = notebooks.load_release(course / "exercises" / "mha")
        once = one_off_costs()
        start = time.perf_counter()
        rule(releases["05_assembly"], kit.filled(course, "05_assembly"))
        once["rule"] = time.perf_counter() - start
        for _ in range(args.repeat):
            for n in kit.NOTEBOOKS:
                release, nb = releases[n], kit.filled(course, n)
                cases = cases_of(release)
                imports = "numpy, torch" if n == "05_assembly" else "numpy"
                rows[n]["floor"].append(interpreter_and_imports(imports) + test_work(release, nb, cases))
                rows[n]["rule"].append(rule(release, nb))
                for label, unsafe in (("sandboxed", False), ("no sandbox", True)):
                    start = time.perf_counter()
                    result = judging.grade_notebook(release, nb, "", cases, unsafe=unsafe)
                    rows[n][label].append(time.perf_counter() - start)
                    assert all(t["score"] == t["points"] for t in result["tests"]), result
            for n, seconds in stock_batch(stock_course).items():
                rows[n]["stock"].append(seconds)
    med = statistics.median
    print(f"Grading one notebook: medians of {args.repeat} runs, seconds\n")
    print("| notebook | floor | sandboxed | no sandbox | stock autograde | sandboxed / floor | stock / sandboxed "
          "| ready-made rule (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, r in rows.items():
        f, s, u, k, a = (med(r[key]) for key in ("floor", "sandboxed", "no sandbox", "stock", "rule"))
        print(f"| {n} | {f:.2f} | {s:.2f} | {u:.2f} | {k:.2f} | {s / f:.2f} | {k / s:.2f} | {1000 * a:.1f} |")
    print(f"\nOnce per grading run: the NumPy fork server starts in {once['server']:.2f} s, the torch one "
          f"(for the first exercise-5 notebook) in {once['torch']:.2f} s; the ready-made rule's first call "
          f"(importing the admitted modules to resolve names) takes {once['rule']:.2f} s.")
    costs = hardening_costs(args.jobs)
    print(f"\nA trivial job (one test, one call), fastest of {args.jobs}: {costs['job'] * 1000:.1f} ms with every "
          "protection. Each protection's cost per job (fastest with it, less fastest without it):")
    print("\n| protection | ms per job |\n|---|---|")
    for name in ("seccomp filter", "cgroup", "fresh keyring"):
        print(f"| {name} | {costs[name] * 1000:.1f} |")
    print(f"\nThe job's cgroup itself (created, then removed once the job's processes are gone), timed by the "
          f"fork server: {costs['cgroup itself'] * 1000:.2f} ms per job. Under the filter, a system call costs "
          f"{costs['per call'] * 1e9:.0f} ns more (getppid, timed in a sandbox with and without it).")

if __name__ == "__main__":
    main()
