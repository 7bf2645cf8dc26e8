"""What the instructor sees: a progress line while grading, then one summary of the whole class.

The summary is built from every graded notebook's stored result (autograded/<student>/<assignment>/
<notebook>.result.json), not only from this run, so a resumed or partial run still shows the
class. Three CSV files are written next to nbgrader's grades.csv:

* ``grades_by_student.csv``: one row per student, a column per notebook and per test, the total
  (for a spreadsheet or an LMS import);
* ``mistakes.csv``: each named mistake, how many students made it, and who;
* ``tests.csv``: each test, how many students passed and failed it.
"""
import csv
import json
import sys
import time
from collections import Counter, defaultdict


class Progress:
    """A progress line with rate and ETA on stderr (redrawn in place on a terminal)."""

    def __init__(self, total: int):
        self.total, self.count, self.start, self.last = total, 0, time.monotonic(), 0.0
        self.tty = sys.stderr.isatty()

    def step(self) -> None:
        self.count += 1
        now = time.monotonic()
        if self.tty or now - self.last >= 5 or self.count == self.total:
            self.last = now
            print(("\r" if self.tty else "") + self.line(now), end="" if self.tty else "\n", file=sys.stderr,
                  flush=True)

    def line(self, now: float) -> str:
        elapsed = now - self.start
        rate = self.count / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.count) / rate if rate else 0.0
        filled = int(30 * self.count / max(self.total, 1))
        return (f"[{'#' * filled}{'.' * (30 - filled)}] {self.count}/{self.total} notebooks · "
                f"{rate:.2f}/s · elapsed {elapsed:.0f} s · ETA {eta:.0f} s")

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def done(self) -> None:
        if self.tty and self.count:
            print(file=sys.stderr)


def result_path(course, student: str, notebook: str):
    return course.folder("autograded", student) / f"{notebook}.result.json"


def save(course, student: str, notebook: str, result: dict) -> None:
    path = result_path(course, student, notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


def load_all(course) -> dict[str, dict[str, dict]]:
    """{student: {notebook: stored result}} for every graded notebook of the class."""
    students, _ = course.students()
    out = {}
    for student in students:
        for name in course.releases:
            try:
                out.setdefault(student, {})[name] = json.loads(result_path(course, student, name).read_text())
            except (OSError, ValueError):
                pass
    return out


def summary(course, results: list, failed: list, notes: list[str]) -> None:
    """Print the class table and statistics; write the three CSV files."""
    graded = load_all(course)
    names = list(course.releases)
    tests = [(n, g) for n in names for g in course.releases[n].grade_cells]
    rows, mistakes, passed, handed_in = [], defaultdict(set), Counter(), Counter()
    for student, per_nb in sorted(graded.items()):
        row = {"student": student}
        for name in names:
            res = per_nb.get(name)
            row[name] = "" if res is None else sum(t["score"] for t in res["tests"])
            handed_in[name] += res is not None and res.get("status") != "missing"
            for t in (res or {}).get("tests", []):
                row[f"{name}/{t['id']}"] = t["score"]
                passed[(name, t["id"])] += t["score"] >= t["points"]
                if t.get("mistake"):
                    mistakes[(t["mistake"], name)].add(student)
        row["total"] = sum(v for k, v in row.items() if k in names and v != "")
        missing = [n.split("_", 1)[0] for n, res in per_nb.items() if res.get("status") == "missing"]
        flags = sorted({n for res in per_nb.values() for n in res.get("notes", [])})
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
    _print(rows, names, mistake_rows, test_rows, results, failed, notes, course)


def _write(path, fields: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _print(rows, names, mistake_rows, test_rows, results, failed, notes, course) -> None:
    out = sys.stdout
    short = [n.split("_", 1)[0] for n in names]
    print(f"\n{'student':<20}" + "".join(f"{s:>6}" for s in short) + f"{'total':>8}  flagged", file=out)
    for row in rows:
        cells = "".join(f"{row[n]:>6g}" if row[n] != "" else f"{'-':>6}" for n in names)
        print(f"{row['student'][:20]:<20}{cells}{row['total']:>8g}  {row['flagged'][:60]}", file=out)
    if mistake_rows:
        print("\nWhat the class got wrong (students per named mistake):", file=out)
        for m in mistake_rows[:15]:
            print(f"  {m['students']:>4} student(s): {m['mistake']} ({m['notebook']})", file=out)
    print("\nPer test (passed / handed in):", file=out)
    for t in test_rows:
        print(f"  {t['notebook']}/{t['test']}: {t['passed']}/{t['passed'] + t['failed']}", file=out)
    print(f"\nThis run graded {len(results)} notebook(s)"
          + (f"; {len(failed)} could not be graded (sandbox or worker failures, retried; the next run tries "
             "them again): " + ", ".join(f"{j['student']}/{j['notebook']}" for j in failed) if failed else "")
          + ". Tables: grades_by_student.csv, mistakes.csv, tests.csv; feedback in feedback/.", file=out)
    for job in failed:
        print(f"  not graded: {job['student']}/{job['notebook']}: {job.get('error', '')[:300]}", file=out)
    for note in notes:
        print(f"  note: {note}", file=out)
