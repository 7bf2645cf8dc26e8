"""Grading benchmark for the nbgrader exercises (a measurement, not a test).

For each exercise notebook, solved with the reference answer:

1. run-all: what a student's "restart kernel and run all" costs (a fresh kernel, every cell,
   visible tests only), as nbclient runs it; the target is <= 5 s;
2. graded: what `nbgrader autograde` spends on that notebook inside one batch (from its
   timestamped log: from "Sanitizing <notebook>" to the next notebook), plus, once per batch,
   the start of the nbgrader command itself;
3. floor: the least any grader can spend: a fresh kernel running the imports, the student's
   cells and the test cells WITH the hidden tests (nothing else), split into kernel start,
   import cells (the read-only setup cell and the test cell that first imports mha_checks)
   and the rest.

Everything runs in a scratch copy of the course. Medians of --repeat runs.

    .venv/bin/python bench/bench_grading.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from submissions import kit  # noqa: E402  (the test suite's submission builder)

LOG_FORMAT = "%(asctime)s.%(msecs)03d|%(message)s"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\|(.*)$")


def timed_run(nb: dict) -> tuple[float, list[float]]:
    """Execute a notebook in a fresh kernel: (total seconds, seconds per code cell)."""
    node = nbformat.reads(json.dumps(nb), as_version=4)
    client = NotebookClient(node, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(ROOT)}})
    start = time.perf_counter()
    client.execute()
    total = time.perf_counter() - start
    cells = []
    for cell in node.cells:
        if cell.cell_type == "code":
            t = cell.metadata.get("execution", {})
            begin, end = t.get("iopub.execute_input"), t.get("shell.execute_reply")
            cells.append((_iso(end) - _iso(begin)) if begin and end else 0.0)
    return total, cells


def _iso(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def floor_notebook(name: str, course: Path) -> tuple[dict, int]:
    """The solved student version whose test cells are the source's (with hidden tests), try-it cells
    removed; and the index of the code cell that first imports mha_checks."""
    nb = kit.filled(course, name)
    source = {kit.grade_id(c): c for c in kit.read(course / "solutions" / kit.ASSIGNMENT / f"{name}.ipynb")["cells"]}
    cells = []
    for cell in nb["cells"]:
        gid = kit.grade_id(cell)
        if cell["cell_type"] != "code" or (gid is None):
            continue  # markdown and the free try-it cells are not part of grading
        if cell["metadata"]["nbgrader"].get("grade"):
            cell = copy.deepcopy(cell)
            cell["source"] = source[gid]["source"]
        cells.append(cell)
    nb["cells"] = cells
    first_import = next(i for i, c in enumerate(cells) if "mha_checks" in "".join(c["source"]))
    return nb, first_import


def graded_batch(course: Path, student: str) -> tuple[float, float, dict[str, float]]:
    """One `nbgrader autograde` of one student with every notebook: (command seconds, start-up
    seconds before the first notebook, {notebook: seconds})."""
    kit.submit(course, student, {n: kit.filled(course, n) for n in kit.NOTEBOOKS})
    start = time.time()
    run = kit.nbgrader(course, "autograde", kit.ASSIGNMENT, "--student", student,
                       f"--Application.log_format={LOG_FORMAT}", "--Application.log_datefmt=%Y-%m-%d %H:%M:%S")
    end = time.time()
    assert run.returncode == 0, run.stdout[-2000:]
    marks = []  # (time, notebook) at each "Sanitizing"
    for line in run.stdout.splitlines():
        m = STAMP.match(line)
        if m and m.group(2).startswith("Sanitizing "):
            marks.append((datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp(),
                          Path(m.group(2).split()[-1]).stem))
    per_nb = {nb: (marks[i + 1][0] if i + 1 < len(marks) else end) - t for i, (t, nb) in enumerate(marks)}
    return end - start, marks[0][0] - start, per_nb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        course = kit.make_course(Path(tmp) / "course")
        run_all = {n: [] for n in kit.NOTEBOOKS}
        floor = {n: [] for n in kit.NOTEBOOKS}
        parts = {n: [] for n in kit.NOTEBOOKS}
        graded = {n: [] for n in kit.NOTEBOOKS}
        commands, startups = [], []
        for r in range(args.repeat):
            for n in kit.NOTEBOOKS:
                run_all[n].append(timed_run(kit.filled(course, n))[0])
                nb, first_import = floor_notebook(n, course)
                total, cells = timed_run(nb)
                floor[n].append(total)
                imports = cells[0] + cells[first_import]
                parts[n].append((total - sum(cells), imports, sum(cells) - imports))
            command, startup, per_nb = graded_batch(course, f"bench{r}")
            commands.append(command)
            startups.append(startup)
            for n, s in per_nb.items():
                graded[n].append(s)

    med = statistics.median
    print(f"Grading benchmark: medians of {args.repeat} runs (seconds)\n")
    print("| notebook | run-all (student) | graded in batch | floor | kernel start | imports | "
          "student + test cells | graded / floor |")
    print("|---|---|---|---|---|---|---|---|")
    for n in kit.NOTEBOOKS:
        k, i, t = (med(p[j] for p in parts[n]) for j in range(3))
        print(f"| {n} | {med(run_all[n]):.2f} | {med(graded[n]):.2f} | {med(floor[n]):.2f} | {k:.2f} | {i:.2f} | "
              f"{t:.2f} | {med(graded[n]) / med(floor[n]):.2f} |")
    print(f"\nOne `nbgrader autograde` command for one student (5 notebooks): {med(commands):.2f} s, of which "
          f"{med(startups):.2f} s start-up before the first notebook (paid once per batch, not per student).")
    print(f"Target: run-all <= 5 s per notebook; worst here {max(med(v) for v in run_all.values()):.2f} s.")


if __name__ == "__main__":
    main()
