"""What the instructor sees: what the run is doing, a progress bar, then one screen of summary.

Before the first notebook, :func:`status` says what the run is doing (probe, fork servers,
planning). While grading, :class:`Progress` draws a tqdm bar sized to the terminal (one line,
redrawn in place; a plain line every few seconds when stderr is not a terminal). It ticks every
second whether or not results come (elapsed time never stops) and names the notebook that has been
running longest: a few endless loops in a large class look like what they are, not like a hang.
The rate and ETA count from the first result on, so the time spent connecting to Dask or starting
workers never inflates the first ETA; while no result comes, the ETA gives way to what is running.

The summary is built from every graded notebook's stored result (autograded/<student>/<assignment>/
<notebook>.result.json), not only from this run, so a resumed or partial run still shows the
class. On a terminal it fits the terminal's width and one 24-line screen (totals, the distribution,
the top mistakes, what failed, where to see more); into a pipe or a log file nothing is cut. The
whole class goes to files next to nbgrader's grades.csv:

* ``grades_by_student.csv``: one row per student, a column per notebook and per test, the total
  (for a spreadsheet or an LMS import);
* ``mistakes.csv``: each named mistake, how many students made it, and who; functions a student left
  unwritten (the release's ``raise NotImplementedError()`` still in place) are rows of their own kind,
  never counted among the mistakes;
* ``tests.csv``: each test, how many students passed and failed it;
* ``class_report.html``: the distribution and the pass rates as figures, the mistakes
  (class_report.py).

Every student-controlled string goes through text.for_terminal or text.for_csv on its way out.
"""
import csv
import functools
import json
import os
import sys
import threading
import time
from collections import Counter, defaultdict

from tqdm import tqdm

from . import class_report
from .jobs import NOT_GRADED
from .text import TERMINAL_CAP, for_csv, for_terminal

WIDTH = 80          # the summary's width on a terminal whose width cannot be read
PLAIN_EVERY_S = 10  # a progress line this often when stderr is not a terminal
TICK_S = 1.0        # the bar is redrawn this often, results or not
TOP = 5             # mistakes and failures named on the screen
ETA_AFTER_S = 2.0   # no rate or ETA before this long after the first result
STALE_AFTER_S = 5.0  # no result for this long (and longer than 3 usual gaps): what runs, not an ETA
LONG_S = 5.0        # a job running this long is named beside the ETA
UNWRITTEN = "not written yet"  # the judge's label of a function still raising NotImplementedError
MISTAKE, LEFT_UNWRITTEN = "mistake", "left unwritten"  # the kinds of rows of mistakes.csv


def status(what: str) -> None:
    """One line on stderr saying what the run does now (before the first notebook)."""
    print(f"mha_grader: {what} ...", file=sys.stderr, flush=True)


class Progress:
    """A progress bar with rate and ETA on stderr, counted from the first result, redrawn every TICK_S
    seconds by a thread of its own. ``running``: a callable giving [(what, since)] for the jobs in
    progress (``since``: time.monotonic() when it started); the longest-running is named."""

    def __init__(self, total: int, where: str = "", running=None):
        self.total, self.count, self.start = total, 0, time.monotonic()
        self.first = None  # (time, count) of the first result: rate and ETA count from there
        self.latest = self.start  # when the last result came
        self.running = running or (lambda: [])
        self.tty, self.last = sys.stderr.isatty(), self.start
        self.lock = threading.Lock()
        self.bar = tqdm(total=total, desc="grading", unit="nb", file=sys.stderr, dynamic_ncols=True,
                        bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}",
                        mininterval=0.2, disable=not self.tty or not total)
        self._show(f"{where}: waiting for the first result" if where else "waiting for the first result")
        if not self.tty and total:
            print(f"grading {total} notebook(s) ({where})", file=sys.stderr, flush=True)
        self.ended = threading.Event()
        self.ticker = threading.Thread(target=self._tick_until_done, name="mha-progress", daemon=True)
        if total:
            self.ticker.start()

    def watch(self, running) -> None:
        """Name what ``running()`` gives (the backend's jobs in progress) from now on."""
        self.running = running

    def step(self, n: int = 1) -> None:
        with self.lock:
            now = time.monotonic()
            self.count += n
            self.latest = now
            if self.first is None:
                self.first = (now, self.count)
            self.bar.update(n)
            self._show(self.line(now))
            if not self.tty and (now - self.last >= PLAIN_EVERY_S or self.count == self.total):
                self._plain(now)

    def tick(self) -> None:
        """Redraw with the time now (what the ticker thread does every TICK_S seconds)."""
        with self.lock:
            now = time.monotonic()
            if self.count >= self.total:
                return
            self._show(self.line(now))
            if not self.tty and now - self.last >= PLAIN_EVERY_S:
                self._plain(now)

    def _tick_until_done(self) -> None:
        while not self.ended.wait(TICK_S):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a redraw that fails must not end the run; the next one tries again
                pass

    def _plain(self, now: float) -> None:
        self.last = now
        print(f"grading: {self.count}/{self.total} notebooks, {self.line(now, None)}", file=sys.stderr, flush=True)

    def line(self, now: float, room: int | None = 0) -> str:
        """The bar's words: rate, elapsed, ETA, and the job running longest once it has run LONG_S; while no
        result comes, elapsed and what runs, no ETA. ``room``: at most this many characters (0: what the
        terminal leaves; None: no limit, and up to 3 jobs named)."""
        text, most = self.rate_eta(now), 3 if room is None else 1
        if self.count < self.total:
            jobs = sorted(self.running(), key=lambda job: job[1])
            long = bool(jobs) and now - jobs[0][1] >= LONG_S
            if self._stale(now) or (long and self.total - self.count <= len(jobs)):  # an ETA would say nothing
                text = f"{_clock(now - self.start)}; " + (self._running_text(now, jobs, most) or "waiting for results")
            elif long:  # (the rate makes room for the name)
                text = f"{self.rate_eta(now, rate=False)}; {self._running_text(now, jobs, most)}"
        if room == 0:
            room = self._room()
        return text if room is None or len(text) <= room else text[:max(room - 1, 0)] + "…"

    def _stale(self, now: float) -> bool:
        """No result for a while (longer than STALE_AFTER_S and than 3 of the usual gaps between results)."""
        gap = (self.latest - self.first[0]) / max(self.count - self.first[1], 1) if self.first else 0.0
        return now - self.latest >= max(STALE_AFTER_S, 3 * gap)

    def _running_text(self, now: float, jobs: list[tuple[str, float]], most: int) -> str:
        """"a/02_split_heads running 3:05", or "4 running: b/02_split_heads 3:05, ..." (``jobs``: the oldest
        first)."""
        if len(jobs) <= 1:
            return f"{for_terminal(jobs[0][0], 120)} running {_clock(now - jobs[0][1])}" if jobs else ""
        named = ", ".join(f"{for_terminal(what, 120)} {_clock(now - since)}" for what, since in jobs[:most])
        return f"{len(jobs)} running: {named}" + (", ..." if len(jobs) > most else "")

    def _room(self) -> int | None:
        """What the terminal leaves the bar's words (None when there is no bar to share the line with)."""
        if self.bar.disable:
            return None
        columns = self.bar.ncols or os.get_terminal_size(sys.stderr.fileno()).columns
        fixed = len("grading 100%|") + 5 + len(f"| {self.total}/{self.total}, ")  # the bar keeps 5 cells
        return max(columns - fixed, 10)

    def rate_eta(self, now: float, rate: bool = True) -> str:
        """"12.3/s 0:40 ETA 1:02": the rate of the results after the first, once there are a few over a few
        seconds (results may come in bursts: a Dask task grades one student's notebooks together)."""
        elapsed = _clock(now - self.start)
        t0, n0 = self.first or (now, self.count)
        done = self.count - n0
        if done < 3 or now - t0 < ETA_AFTER_S:
            return f"{elapsed} elapsed"
        per_s = done / (now - t0)
        return (f"{per_s:.1f}/s " if rate else "") + f"{elapsed} ETA {_clock((self.total - self.count) / per_s)}"

    def _show(self, text: str) -> None:
        if not self.bar.disable:
            self.bar.set_postfix_str(text, refresh=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def done(self) -> None:
        self.ended.set()
        if self.ticker.is_alive():
            self.ticker.join()
        with self.lock:
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


def summary(course, results: list, failed: list, notes: list[str], out=None, standing=None) -> None:
    """Write the three CSV files and the class report; print one screen of summary (on a terminal: its
    width; into a pipe or a file: nothing cut). The stored results are read one student at a time.
    ``standing``: the class's lateness.ClassStanding (times, lateness, penalties, lms ids; None: none known)."""
    students, duedate = (standing.students, standing.duedate) if standing is not None else ({}, None)
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
        row.update(late_columns(students.get(student), row["total"]))
        rows.append(row)
    _write(course.root / "grades_by_student.csv",
           ["student", *names, *(f"{n}/{g.id}" for n, g in tests), "total", "flagged", *LATE_COLUMNS], rows)
    mistake_rows = mistake_table(mistakes, names)
    _write(course.root / "mistakes.csv", ["mistake", "notebook", "students", "kind", "who"], mistake_rows)
    test_rows = [{"notebook": n, "test": g.id, "points": g.points, "passed": passed[(n, g.id)],
                  "failed": handed_in[n] - passed[(n, g.id)]} for n, g in tests]
    _write(course.root / "tests.csv", ["notebook", "test", "points", "passed", "failed"], test_rows)
    _write(course.root / "notes.csv", ["note"], [{"note": n} for n in notes])  # what the terminal only counts
    possible = sum(g.points for _, g in tests)
    late = [{"student": r["student"], "seconds_late": r["seconds_late"], "penalty": r["late_penalty"]}
            for r in rows if r["seconds_late"]]
    report_path = class_report.write(course.root / "class_report.html", course.assignment,
                                     [r["total"] for r in rows], possible, test_rows, mistake_rows,
                                     (duedate, late))
    folders = course.ungraded()
    ungraded = [name for name, _ in folders] + [f"{job['student']}/{job['notebook']}" for job, result in results
                                                if result.get("status") in NOT_GRADED]
    ungraded_notes = {why for _, why in folders} | {n for n in notes if n.split(": not graded: ")[0] in ungraded}
    unwritten = {s for (m, _), who in mistakes.items() if left_unwritten(m) for s in who}
    out = out or sys.stdout
    lines = screen([r["total"] for r in rows], possible, mistake_rows, results, failed, notes,
                   report_path.relative_to(course.root), ungraded, ungraded_notes, width=screen_width(out),
                   unwritten=len(unwritten), late=late)
    print("\n".join(lines), file=out)


LATE_COLUMNS = ("lms_user_id", "timestamp", "seconds_late", "late_penalty", "score")


def late_columns(standing, total: float) -> dict:
    """grades_by_student.csv's last columns, as nbgrader's export has them: the student's lms_user_id, when the
    submission was handed in (UTC), how many seconds after the due date (with the student's extension), the late
    penalty in points and the score after it (the total less the penalty, at least 0)."""
    if standing is None:
        return {"lms_user_id": "", "timestamp": "", "seconds_late": 0, "late_penalty": 0.0, "score": total}
    return {"lms_user_id": standing.lms_user_id or "", "timestamp": str(standing.timestamp or ""),
            "seconds_late": standing.seconds_late, "late_penalty": standing.penalty,
            "score": max(0.0, total - standing.penalty)}


def left_unwritten(label: str) -> bool:
    """Whether a mistake label says the function was left as released (``raise NotImplementedError()``):
    not a mistake the student made, a part not yet attempted."""
    return label == UNWRITTEN or label.endswith(f": {UNWRITTEN}")


def mistake_table(mistakes: dict, notebooks: list[str]) -> list[dict]:
    """mistakes.csv's rows from {(label, notebook): students}: most students first, then in the course's
    order of notebooks, then by label; each row's kind says whether it is a mistake or a part left unwritten."""
    order = {n: i for i, n in enumerate(notebooks)}
    ranked = sorted(mistakes.items(), key=lambda kv: (-len(kv[1]), order.get(kv[0][1], len(order)), kv[0]))
    return [{"mistake": m, "notebook": n, "students": len(s), "kind": LEFT_UNWRITTEN if left_unwritten(m) else MISTAKE,
             "who": " ".join(sorted(s))} for (m, n), s in ranked]


def screen_width(out) -> int | None:
    """The summary's width: the terminal's, or None (nothing cut) when ``out`` is a pipe or a file."""
    try:
        if not out.isatty():
            return None
        return os.get_terminal_size(out.fileno()).columns or WIDTH
    except (AttributeError, OSError, ValueError):  # (a stream with no file behind it)
        return None if not getattr(out, "isatty", lambda: False)() else WIDTH


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
           notes: list[str], report_path, ungraded: list[str] = (), ungraded_notes: set = frozenset(),
           width: int | None = WIDTH, unwritten: int = 0, late: list[dict] = ()) -> list[str]:
    """The summary as lines of at most ``width`` characters (None: nothing cut), 24 lines at most with TOP = 5.
    ``ungraded``: the folders of submitted/ and this run's notebooks that were not graded (each named once
    here, why in notes.csv); ``ungraded_notes``: their notes (the first note shown is another one);
    ``unwritten``: how many students left a function unwritten (counted apart from the mistakes); ``late``: the
    late submissions (class report rows: student, seconds_late, penalty), named on one line, latest first."""
    fit = functools.partial(_fit, width=width)
    lines = [""]
    if totals:
        ordered = sorted(totals)
        full = sum(t >= possible for t in totals)
        lines.append(fit(f"{len(totals)} students; total out of {possible:g}: mean {sum(totals) / len(totals):.1f}, "
                         f"median {ordered[len(ordered) // 2]:g}; {full} full marks"))
        lines += _distribution(totals, possible)
    named = [m for m in mistake_rows if m.get("kind", MISTAKE) == MISTAKE]
    aside = f"{unwritten} student(s) left functions unwritten" if unwritten else ""
    if named:
        lines.append(fit(f"Top mistakes (students), of {len(named)} named" + (f"; {aside}:" if aside else ":")))
        for m in named[:TOP]:  # the notebook is never cut: the label gets what is left of the line
            tail = f" ({m['notebook']})"
            room = TERMINAL_CAP if width is None else max(20, width - 9 - len(tail))
            lines.append(fit(f"  {m['students']:>5}  {for_terminal(m['mistake'], room)}{tail}"))
    elif aside:
        lines.append(fit(f"No named mistake; {aside} (mistakes.csv says who)."))
    if late:
        latest = sorted(late, key=lambda r: -r["seconds_late"])
        named = ", ".join(f"{r['student']} {class_report.late_by(r['seconds_late'])}" for r in latest[:TOP])
        lines.append(fit(f"{len(late)} late submission(s), {sum(r['penalty'] for r in late):g} point(s) of penalty: "
                         f"{for_terminal(named, 300)}" + (", ..." if len(late) > TOP else "")))
    lines.append(fit(f"This run graded {len(results)} notebook(s)."
                     + (f" {len(failed)} could not be graded (the next run tries again):" if failed else "")))
    for job in failed[:TOP]:  # an id is never cut: the reason gets what is left of the line
        head = f"  {job['student']}/{job['notebook']}: "
        room = TERMINAL_CAP if width is None else max(20, width - len(head))
        lines.append(head + for_terminal(job.get("error") or "no reason given", room))
    if len(failed) > TOP:
        lines.append(f"  ... and {len(failed) - TOP} more (the next run tries them again)")
    if ungraded:
        names = ", ".join(for_terminal(n, 40) for n in ungraded[:TOP]) + (", ..." if len(ungraded) > TOP else "")
        lines.append(fit(f"Not graded ({len(ungraded)}; why: notes.csv): {names}"))
    if notes:
        first = next((n for n in notes if n not in ungraded_notes), None)
        lines.append(fit(f"{len(notes)} note(s) in notes.csv" + (f", the first: {for_terminal(first, 300)}"
                                                                  if first else "")))
    lines.append(fit(f"More: {report_path}; CSV: grades_by_student, mistakes, tests, notes"))
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


def _fit(line: str, width: int | None = WIDTH) -> str:
    return line if width is None or len(line) <= width else line[:width - 1] + "…"
