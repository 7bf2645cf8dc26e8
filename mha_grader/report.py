"""What the instructor sees: what the run is doing, a progress bar, then one screen of summary.

Before the first notebook, :func:`status` says what the run is doing (probe, fork servers,
planning). While grading, :class:`Progress` draws a tqdm bar sized to the terminal (one line,
redrawn in place; a plain line every few seconds when stderr is not a terminal). The rate and
ETA count from the first result on, so the time spent connecting to Dask or starting workers
never inflates the first ETA.

The summary is built from every graded notebook's stored result (autograded/<student>/<assignment>/
<notebook>.result.json), not only from this run, so a resumed or partial run still shows the
class. It fits one 80 x 24 screen (totals, the distribution, the top mistakes, what failed, where
to see more); the whole class goes to files next to nbgrader's grades.csv:

* ``grades_by_student.csv``: one row per student, a column per notebook and per test, the total
  (for a spreadsheet or an LMS import);
* ``mistakes.csv``: each named mistake, how many students made it, and who;
* ``tests.csv``: each test, how many students passed and failed it;
* ``class_report.html``: the distribution and the pass rates as figures, the mistakes
  (class_report.py).

Every student-controlled string goes through text.for_terminal or text.for_csv on its way out.
"""
import csv
import json
import os
import sys
import time
from collections import Counter, defaultdict

from tqdm import tqdm

from . import class_report
from .text import for_csv, for_terminal

WIDTH = 80          # the summary's width (it never wraps on an 80-column terminal)
PLAIN_EVERY_S = 10  # a progress line this often when stderr is not a terminal
TOP = 5             # mistakes and failures named on the screen
ETA_AFTER_S = 2.0   # no rate or ETA before this long after the first result


def status(what: str) -> None:
    """One line on stderr saying what the run does now (before the first notebook)."""
    print(f"mha_grader: {what} ...", file=sys.stderr, flush=True)


class Progress:
    """A progress bar with rate and ETA on stderr, counted from the first result."""

    def __init__(self, total: int, where: str = ""):
        self.total, self.count, self.start = total, 0, time.monotonic()
        self.first = None  # (time, count) of the first result: rate and ETA count from there
        self.tty, self.last = sys.stderr.isatty(), self.start
        self.bar = tqdm(total=total, desc="grading", unit="nb", file=sys.stderr, dynamic_ncols=True,
                        bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}",
                        mininterval=0.2, disable=not self.tty or not total)
        self._show(f"{where}: waiting for the first result" if where else "waiting for the first result")
        if not self.tty and total:
            print(f"grading {total} notebook(s) ({where})", file=sys.stderr, flush=True)

    def step(self, n: int = 1) -> None:
        now = time.monotonic()
        self.count += n
        if self.first is None:
            self.first = (now, self.count)
        self.bar.update(n)
        self._show(self.rate_eta(now))
        if not self.tty and (now - self.last >= PLAIN_EVERY_S or self.count == self.total):
            self.last = now
            print(f"grading: {self.count}/{self.total} notebooks, {self.rate_eta(now)}", file=sys.stderr, flush=True)

    def rate_eta(self, now: float) -> str:
        """"12.3/s 0:40 ETA 1:02": the rate of the results after the first, once there are a few over a few
        seconds (results may come in bursts: a Dask task grades one student's notebooks together)."""
        elapsed = _clock(now - self.start)
        t0, n0 = self.first or (now, self.count)
        done = self.count - n0
        if done < 3 or now - t0 < ETA_AFTER_S:
            return f"{elapsed} elapsed"
        rate = done / (now - t0)
        return f"{rate:.1f}/s {elapsed} ETA {_clock((self.total - self.count) / rate)}"

    def _show(self, text: str) -> None:
        if not self.bar.disable:
            self.bar.set_postfix_str(text, refresh=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def done(self) -> None:
        self.bar.close()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def result_path(course, student: str, notebook: str):
    return course.folder("autograded", student) / f"{notebook}.result.json"


def save(course, student: str, notebook: str, result: dict) -> None:
    path = result_path(course, student, notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


def load_all(course):
    """(student, {notebook: stored result}) for every student of the class with a graded notebook, in order,
    one student at a time (a class of 10,000 is never held in memory at once)."""
    students, _ = course.students()
    for student in students:
        stored = {}
        for name in course.releases:
            try:
                stored[name] = json.loads(result_path(course, student, name).read_text())
            except (OSError, ValueError):
                pass
        if stored:
            yield student, stored


def summary(course, results: list, failed: list, notes: list[str], out=None) -> None:
    """Write the three CSV files and the class report; print one screen of summary."""
    names = list(course.releases)
    tests = [(n, g) for n in names for g in course.releases[n].grade_cells]
    rows, mistakes, passed, handed_in = [], defaultdict(set), Counter(), Counter()
    for student, per_nb in load_all(course):
        row = {"student": student}
        for name in names:
            res = per_nb.get(name)
            row[name] = "" if res is None else sum(t["score"] for t in res["tests"])
            handed_in[name] += res is not None and res.get("status") != "missing"
            for t in (res or {}).get("tests", []):
                row[f"{name}/{t['id']}"] = t["score"]
                passed[(name, t["id"])] += t["score"] >= t["points"]
                if t.get("mistake"):
                    mistakes[(str(t["mistake"]), name)].add(student)
        row["total"] = sum(v for k, v in row.items() if k in names and v != "")
        missing = [n.split("_", 1)[0] for n, res in per_nb.items() if res.get("status") == "missing"]
        flags = sorted({str(n) for res in per_nb.values() for n in res.get("notes", [])})
        row["flagged"] = "; ".join(flags + ([f"not handed in: {' '.join(missing)}"] if missing else []))[:300]
        rows.append(row)
    _write(course.root / "grades_by_student.csv",
           ["student", *names, *(f"{n}/{g.id}" for n, g in tests), "total", "flagged"], rows)
    mistake_rows = [{"mistake": m, "notebook": n, "students": len(s), "who": " ".join(sorted(s))}
                    for (m, n), s in sorted(mistakes.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    _write(course.root / "mistakes.csv", ["mistake", "notebook", "students", "who"], mistake_rows)
    test_rows = [{"notebook": n, "test": g.id, "points": g.points, "passed": passed[(n, g.id)],
                  "failed": handed_in[n] - passed[(n, g.id)]} for n, g in tests]
    _write(course.root / "tests.csv", ["notebook", "test", "points", "passed", "failed"], test_rows)
    _write(course.root / "notes.csv", ["note"], [{"note": n} for n in notes])  # what the terminal only counts
    possible = sum(g.points for _, g in tests)
    report_path = class_report.write(course.root / "class_report.html", course.assignment,
                                     [r["total"] for r in rows], possible, test_rows, mistake_rows)
    lines = screen([r["total"] for r in rows], possible, mistake_rows, results, failed, notes,
                   report_path.relative_to(course.root))
    print("\n".join(lines), file=out or sys.stdout)


def _write(path, fields: list[str], rows: list[dict]) -> None:
    """A CSV file whose every cell is safe (text.for_csv: one printable line, no formula), replaced whole (a run
    stopped while it is written leaves the last one)."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: for_csv(v, 200_000 if k == "who" else 2000) for k, v in row.items()})
    os.replace(partial, path)


def screen(totals: list[float], possible: float, mistake_rows: list[dict], results: list, failed: list,
           notes: list[str], report_path) -> list[str]:
    """The summary as lines of at most WIDTH characters (24 lines at most with TOP = 5)."""
    lines = [""]
    if totals:
        ordered = sorted(totals)
        full = sum(t >= possible for t in totals)
        lines.append(_fit(f"{len(totals)} students; total out of {possible:g}: mean {sum(totals) / len(totals):.1f}, "
                          f"median {ordered[len(ordered) // 2]:g}; {full} full marks"))
        lines += _distribution(totals, possible)
    if mistake_rows:
        lines.append(f"Top mistakes (students), of {len(mistake_rows)} named:")
        lines += [_fit(f"  {m['students']:>5}  {for_terminal(m['mistake'], 50)} ({m['notebook']})")
                  for m in mistake_rows[:TOP]]
    lines.append(_fit(f"This run graded {len(results)} notebook(s)."
                      + (f" {len(failed)} could not be graded (the next run tries again):" if failed else "")))
    for job in failed[:TOP]:  # an id is never cut: the reason gets what is left of the line
        head = f"  {job['student']}/{job['notebook']}: "
        lines.append(head + for_terminal(job.get("error") or "no reason given", max(20, WIDTH - len(head))))
    if len(failed) > TOP:
        lines.append(f"  ... and {len(failed) - TOP} more (the next run tries them again)")
    if notes:
        lines.append(_fit(f"{len(notes)} note(s) in notes.csv, the first: {for_terminal(notes[0], 300)}"))
    lines.append(_fit(f"More: {report_path}; grades_by_student.csv, mistakes.csv, tests.csv, notes.csv"))
    return lines


def _distribution(totals: list[float], possible: float, bins: int = 5) -> list[str]:
    """Students per fifth of the score range, as text bars."""
    counts = class_report.histogram(totals, possible, bins)
    most = max(counts) or 1
    out = []
    for (low, high), count in zip(class_report.bin_edges(possible, bins), counts):
        bar = "#" * round(50 * count / most)
        out.append(f"  {low:>5.4g}-{high:<5.4g} {bar:<50} {count:>5}")
    return out


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 1] + "…"
