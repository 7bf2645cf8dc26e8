"""The trusted side's worst case per notebook (a measurement, not a test): every step the grader takes on a
submission outside the sandbox, each fed what its caps let through at their limits, timed here.

Steps (each bounded by construction, linear in what it reads; the caps are the modules' constants):

* make the job (jobs.Maker, the coordinating process): read the file once (at most MAX_NOTEBOOK_BYTES),
  its sha256, the draw of its hidden inputs;
* parse (notebooks.parse, on the worker): count values and nesting on the bytes, decode, check cells and
  syntax trees, for files at each bound: one 8 MB string; MAX_JSON_VALUES tiny strings; MAX_JSON_VALUES
  brackets nested MAX_JSON_DEPTH deep; MAX_CELLS code cells of MAX_AST_NODES syntax nodes in all;
* read back (sandbox._collect's JSON lines, frames.events, the judge, the feedback page) a job whose
  every case answers at a limit: a list of MAX_VALUES values; the largest array one line may carry; a
  value of 1.57 M numbers (past MAX_VALUES: the harness forwards it as one short record, so this row is
  what the grader would spend if such lines reached it anyway, up to MAX_REPORT bytes); a tuple of 64
  arrays; the right shape with wrong values (the judge's diagnosis runs). The report is cut at
  MAX_REPORT bytes, as the sandbox cuts it.

Not measured here: which cells run (the admission engineer's selection) and the ready-made rule
(bench_grading.py measures it). Times are this machine's, under whatever load it has: a table, not a test.

    .venv/bin/python bench/bench_bounds.py [--repeat 3]
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from mha_checks import calling  # noqa: E402
from mha_grader.trusted import feedback, frames, jobs, judging, notebooks  # noqa: E402
from mha_grader.walls import sandbox  # noqa: E402
from mha_grader.trusted.course import Course  # noqa: E402
from submissions import kit  # noqa: E402

KEY = b"0123456789abcdef" * 4


def seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def files_at_the_bounds(course) -> dict[str, bytes]:
    """Notebook files at each of parse's bounds (just inside them, so that every check runs to its end)."""
    base = kit.filled(course, "05_assembly")

    def with_metadata(value) -> bytes:
        nb = dict(base, metadata={"x": "X"})
        return json.dumps(nb).replace('"X"', value).encode()
    room = notebooks.MAX_JSON_VALUES - sum(json.dumps(base).count(c) for c in ",[{") - 10
    big = json.dumps(dict(base, metadata={"x": "a" * (notebooks.MAX_NOTEBOOK_BYTES - 60_000)})).encode()
    strings = with_metadata("{" + ",".join(f'"{i:x}":""' for i in range(room)) + "}")
    nest = "[" * (notebooks.MAX_JSON_DEPTH - 3) + "]" * (notebooks.MAX_JSON_DEPTH - 3)
    brackets = with_metadata("[" + ",".join([nest] * (room // (notebooks.MAX_JSON_DEPTH - 2))) + "]")
    per_cell = notebooks.MAX_AST_NODES // notebooks.MAX_CELLS // 4  # a statement `x = 1` is 4 nodes
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "x = 1\n" * per_cell} for _ in range(notebooks.MAX_CELLS - len(base["cells"]))]
    many_cells = json.dumps(dict(base, cells=base["cells"] + cells)).encode()
    out = {"one 8 MB string": big, "MAX_JSON_VALUES strings": strings, "brackets MAX_JSON_DEPTH deep": brackets,
           "MAX_CELLS cells, MAX_AST_NODES nodes": many_cells}
    for name, raw in out.items():
        assert len(raw) <= notebooks.MAX_NOTEBOOK_BYTES, (name, len(raw))
        assert notebooks.parse(raw)[0] is not None, (name, notebooks.parse(raw)[1])
    return out


def answers_at_the_limits(release, case) -> dict[str, object]:
    """What one case may send back, at each limit (as the harness writes it: plain data)."""
    line = sandbox.MAX_LINE - 1000
    elements = min(calling.MAX_ELEMENTS, line * 3 // 4 // 8)
    side = int(round(frames.MAX_VALUES ** (1 / 3) * 0.95))
    right_shape = _zeroed(_reference(release, case))
    return {
        f"a list of ~{side ** 3} values (< MAX_VALUES)": [[[0.5] * side] * side] * side,
        f"an array of {elements} float64 (one line)": calling.encode(np.zeros(elements)),
        "1.57 M values nested 4 deep (past MAX_VALUES)": [[[[0.5] * 6] * 64] * 64] * 64,
        "a tuple of 64 arrays": {"$tuple": [calling.encode(np.zeros(line // 64 * 3 // 4 // 8 - 100))] * 64},
        "the right shape, wrong values": right_shape,
    }


def _reference(release, case):
    """The reference solution's answer to ``case``, as the harness would send it."""
    namespace: dict = {}
    for cell in release.setup:
        exec(cell["source"], namespace)
    for code in kit.solution_cells(release.name).values():
        exec(code, namespace)
    return calling.call(namespace[case.function], list(case.names), case.specs())["result"]


def _zeroed(value):
    """An encoded value with every array's elements set to 0 (the same dtypes and shapes)."""
    if isinstance(value, list):
        return [_zeroed(v) for v in value]
    if isinstance(value, dict) and "$array" in value:
        return calling.encode_array(np.zeros_like(calling.decode_array(value["$array"])))
    if isinstance(value, dict):
        return {k: _zeroed(v) for k, v in value.items()}
    return 0.0 if isinstance(value, float) else value


def read_back(release, cases: dict, answer) -> tuple[float, float, float]:
    """(seconds parsing the job's JSON lines, checking them against the schema and judging, rendering the page)
    for a job of this release whose every case answered ``answer``, the report cut at MAX_REPORT."""
    records, size = [{"harness": "started"}], 0
    for g in release.grade_cells:
        for i, _ in enumerate(cases[g.id]):
            record = {"test": g.id, "case": i, "outcome": {"result": answer, "mutated": []}}
            size += len(json.dumps(record)) + 1
            if size > sandbox.MAX_REPORT:
                break
            records.append(record)
        records.append({"test": g.id, "status": "done", "detail": 0, "time": dict.fromkeys(frames.TIMES, 0.0)})
    lines = [json.dumps(r).encode() for r in records]
    start = time.perf_counter()
    parsed = [json.loads(line) for line in lines]
    collect = time.perf_counter() - start
    job = {"tests": [{"id": g.id, "cases": [{"names": list(c.names)} for c in cases[g.id]]}
                     for g in release.grade_cells]}
    report = sandbox.Report(records=parsed, returncode=0)
    prog = notebooks.Program()
    start = time.perf_counter()  # (what the trusted side does with a report: check its records, then judge)
    tests = judging._judge_all(release, cases, [], prog, frames.events(report.records, job), report, sandbox.Limits())
    judge = time.perf_counter() - start
    start = time.perf_counter()
    feedback.render(release, None, {"tests": tests, "notes": [], "status": "graded"}, "student")
    return collect, judge, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        course_dir = kit.make_course(Path(tmp) / "course")
        course = Course(course_dir)
        rows = []
        files = files_at_the_bounds(course_dir)
        for name, raw in files.items():
            path = course_dir / "submitted" / "s" / "mha" / "05_assembly.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)
            record = {"student": "s", "notebook": "05_assembly", "path": str(path), "stamped": None}
            make = jobs.Maker(course, KEY)
            rows.append(("make the job (read, sha256, draw)", name, seconds(lambda: make(dict(record)), args.repeat)))
            rows.append(("parse (bounds, decode, cells)", name, seconds(lambda: notebooks.parse(raw), args.repeat)))
        worst_read = {step: max(s for st, _, s in rows if st == step) for step, _, _ in rows}
        backs = []
        for name, release in course.releases.items():
            cases = jobs.Maker(course, KEY).draw("s", name, "0" * 64)
            first = cases[release.grade_cells[0].id][0]
            for what, answer in answers_at_the_limits(release, first).items():
                timed = [read_back(release, cases, answer) for _ in range(args.repeat)]
                collect, judge, page = (statistics.median(t[i] for t in timed) for i in range(3))
                backs.append((name, what, collect, judge, page))
        print(f"{'step':38} {'at the bound':40} {'s':>7}")
        for step, name, s in rows:
            print(f"{step:38} {name:40} {s:7.3f}")
        print(f"\n{'notebook':22} {'every case answers':46} {'lines s':>8} {'judge s':>8} {'page s':>7}")
        for name, what, collect, judge, page in backs:
            print(f"{name:22} {what:46} {collect:8.3f} {judge:8.3f} {page:7.3f}")
        worst_back = max(c + j + p for _, _, c, j, p in backs)
        total = sum(worst_read.values()) + worst_back
        print(f"\nworst case per notebook, trusted side: make {worst_read['make the job (read, sha256, draw)']:.2f} s"
              f" + parse {worst_read['parse (bounds, decode, cells)']:.2f} s + read back {worst_back:.2f} s"
              f" = {total:.2f} s (caps: file {notebooks.MAX_NOTEBOOK_BYTES >> 20} MB, {notebooks.MAX_JSON_VALUES} "
              f"JSON values nested {notebooks.MAX_JSON_DEPTH} deep, {notebooks.MAX_CELLS} cells, "
              f"{notebooks.MAX_AST_NODES} syntax nodes; report {sandbox.MAX_REPORT >> 20} MB, line "
              f"{sandbox.MAX_LINE >> 20} MB, {frames.MAX_VALUES} values per answer, {calling.MAX_ELEMENTS} "
              "elements per array)")


if __name__ == "__main__":
    main()
