"""What the ready-made rule costs per notebook in the trusted process (a measurement, not a test).

For each notebook - the five reference solutions, every notebook of the honest and ready-made corpora
(tests/submissions/corpora.py, free cells included), and large free cells (issue 26: a 49 kB free
cell cost 30 s of CPU, twice, when free cells were cut down by definitions_only) - the time from the
notebook's cells as the grader reads them (notebooks.program) to the verdict (admission.admit:
scopes, reach, judging, selection), and the share of it that is Python's own parsing (ast.parse of
the same cells), medians of --repeat runs in one process. The first call, which imports the admitted
modules (torch among them) to resolve names, is measured apart. The machine's other load inflates
every figure alike; compare within one run.

    .venv/bin/python bench/bench_admission.py [--repeat 20]
"""
import argparse
import ast
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import numpy as np  # noqa: E402

from mha_checks import admission, hidden  # noqa: E402
from mha_grader.trusted import notebooks  # noqa: E402
from submissions import corpora, judged  # noqa: E402

FOLDER = ROOT / "exercises" / "mha"


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat
    releases = notebooks.load_release(FOLDER)
    raw = {n: json.loads((FOLDER / f"{n}.ipynb").read_text()) for n in releases}
    calls = {n: {g.id: {c.function for c in hidden.hidden_cases(g.id, np.random.default_rng(0))}
                 for g in r.grade_cells} for n, r in releases.items()}

    def program(notebook: str, entry=None, free: tuple = ()):
        reference = judged.reference_answers(notebook)
        entry = entry or corpora.Entry("reference", notebook, next(iter(reference)), reference[next(iter(reference))],
                                       free)
        return notebooks.program(releases[notebook], corpora.notebook(raw[notebook], entry, reference)).cells

    start = time.perf_counter()
    admission.admit(program("05_assembly"), calls["05_assembly"], 1)
    first = time.perf_counter() - start

    rows = [(f"reference {n}", n, program(n)) for n in releases]
    rows += [(f"corpus {e.name}", e.notebook, program(e.notebook, e)) for e in corpora.HONEST + corpora.READY_MADE]
    for size in (49_000, 100_000):
        line = "plt.plot(x, y); y = np.cumsum(x) * 0.5 + 1.0  # a free cell's demo\n"
        rows.append((f"free cell of {size // 1000} kB", "05_assembly",
                     program("05_assembly", free=(line * (size // len(line)),))))

    results = []
    for label, notebook, cells in rows:
        verdict_s = timed(lambda: admission.admit(cells, calls[notebook], 1), repeat)
        parse_s = timed(lambda: [ast.parse(c["source"]) for c in cells if "%" not in c["source"]], repeat)
        results.append((label, sum(len(c["source"]) for c in cells), verdict_s, parse_s))

    print(f"first call (imports the admitted modules, torch among them): {first * 1000:.0f} ms\n")
    print(f"{'notebook':58} {'chars':>8} {'rule ms':>8} {'parse ms':>9}")
    for label, chars, verdict_s, parse_s in results:
        print(f"{label[:58]:58} {chars:8d} {verdict_s * 1000:8.2f} {parse_s * 1000:9.2f}")
    normal = [r for r in results if not r[0].startswith("free cell")]
    ms = sorted(r[2] * 1000 for r in normal)
    print(f"\n{len(normal)} notebooks: rule median {statistics.median(ms):.2f} ms, max {ms[-1]:.2f} ms "
          f"(budget 5 ms); parsing is {statistics.median(r[3] / r[2] for r in normal):.0%} of it (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
