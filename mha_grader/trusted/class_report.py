"""The class report: one static HTML page for the instructor, beside the feedback folder and the CSV files
(class_report.html in the course folder: it quotes mistake labels, which may hold a student's text, so it
is kept out of feedback/, whose pages go to the students).

The distribution of the students' total scores and each test's pass rate as figures (inline SVG
drawn here as text and SVG bars: no script, no request), each figure with a text alternative and the
same numbers in a table with real headers; the named mistakes with how many students made each, most
first, and apart from them the functions students left unwritten. Counts only, but for one table: the
late submissions (who, late by how much, the penalty), shown when the assignment has a due date. It
reads on a phone (the figures' names stand above their bars, long cells wrap: nothing is clipped and
nothing scrolls sideways), in dark mode and in forced colours, with text contrast of at
least 4.5:1, under the same Content Security Policy as the feedback pages (no script of any kind).
"""
import html
import itertools
import re
from pathlib import Path

from .feedback import content_security_policy
from .text import HTML_CAP, for_html, printable

STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#1b1b1b;background:#fff}
figure{margin:1rem 0}figcaption{color:#444}
.chart{display:grid;grid-template-columns:minmax(0,max-content) minmax(4rem,1fr) max-content;gap:.15rem .5rem;
align-items:center;max-width:40rem}
.name{text-align:right}.track{display:block;width:100%;height:1rem}
table{border-collapse:collapse;margin:.5rem 0;max-width:100%}
th,td{border:1px solid #767676;padding:.2rem .4rem;text-align:left;overflow-wrap:break-word}td.n,th.n{text-align:right}
.bar{fill:#1f5fa8}
@media (max-width:30rem){body{padding:1rem .5rem}th,td{padding:.15rem .25rem}.chart{grid-template-columns:minmax(0,1fr) max-content}
.name{grid-column:1/-1;text-align:left;margin-top:.2rem}}
@media (prefers-color-scheme: dark){body{background:#121212;color:#e6e6e6}figcaption{color:#bbb}
.bar{fill:#7fb2ee}th,td{border-color:#8a8a8a}}
@media (forced-colors: active){.bar{fill:CanvasText}}
"""
TABLE_ROWS = 200  # rows of one table on the page (the CSV files have them all)
RUN = 10          # characters of student text without a break opportunity, at most


def bin_edges(possible: float, bins: int) -> list[tuple[float, float]]:
    step = possible / bins if possible else 1
    return [(round(i * step, 2), round((i + 1) * step, 2)) for i in range(bins)]


def histogram(totals: list[float], possible: float, bins: int) -> list[int]:
    """Students per bin of [0, possible] (the last bin holds full marks)."""
    counts = [0] * bins
    for total in totals:
        i = int(total / possible * bins) if possible else 0
        counts[min(max(i, 0), bins - 1)] += 1
    return counts


def _bars(label: str, items: list[tuple[str, float]], top: float, unit: str) -> str:
    """A horizontal bar chart: one row per (name, value), values out of ``top``. The names and values are text
    (they wrap, never clipped; they grow with the reader's font size); each bar is an SVG rectangle whose width
    is an attribute (no inline style: the page's Content Security Policy allows none). On a narrow screen each
    name stands above its bar."""
    rows = "".join(
        f"<span class='name'>{_breakable(name)}</span>"
        f"<svg class='track' viewBox='0 0 100 10' preserveAspectRatio='none' aria-hidden='true' focusable='false'>"
        f"<rect class='bar' width='{100 * value / top if top else 0:.2f}' height='10'/></svg>"
        f"<span class='value'>{value:g}{unit}</span>" for name, value in items)
    return f"<div class='chart' role='img' aria-label='{for_html(label)}'>{rows}</div>"


def _table(caption: str, heads: list[str], rows: list[list], numeric: frozenset = frozenset(),
           names: frozenset = frozenset({0})) -> str:
    """A table with real headers (the first column heads each row); the columns in ``numeric`` align right, those
    in ``names`` hold the course's own identifiers (they may break after each _ and /). Long cells wrap, so the
    table fits a phone's width (no scrolling box, no keyboard trap)."""
    def cell(i: int, value) -> str:
        return _breakable(value) if i in names else _wrappable(value)

    def cls(i: int) -> str:
        return " class='n'" if i in numeric else ""
    head = "".join(f"<th scope='col'{cls(i)}>{for_html(h)}</th>" for i, h in enumerate(heads))
    body = "".join("<tr><th scope='row'>" + cell(0, r[0]) + "</th>"
                   + "".join(f"<td{cls(i)}>{cell(i, v)}</td>" for i, v in enumerate(r[1:], 1)) + "</tr>"
                   for r in rows[:TABLE_ROWS])
    more = f"<p>The first {TABLE_ROWS} of {len(rows)} rows; the CSV file has them all.</p>" if len(rows) > TABLE_ROWS \
        else ""
    return f"<table><caption>{for_html(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _wrappable(value) -> str:
    """Text (a mistake label may quote a student's) as HTML whose unbroken runs may break every RUN characters:
    no word is wider than a phone's column, and the table keeps its widths for what is short."""
    text = printable(value, HTML_CAP, keep="\n\t")
    pieces = re.split(r"(\S{%d,})" % (RUN + 1), text)  # odd pieces: the long runs
    return "".join("<wbr>".join(html.escape(piece[i:i + RUN], quote=True) for i in range(0, len(piece), RUN))
                   if odd else html.escape(piece, quote=True) for odd, piece in zip(itertools.cycle((0, 1)), pieces))


def _breakable(name) -> str:
    """An identifier (02_split_heads/test_split_heads_values) as HTML that may break after each _ and /."""
    return for_html(name).replace("_", "_<wbr>").replace("/", "/<wbr>")


def page(assignment: str, totals: list[float], possible: float, tests: list[dict], mistakes: list[dict],
         late: tuple = (None, [])) -> str:
    """``mistakes``: report.mistake_table's rows (a row of kind "left unwritten" is listed apart); ``late``: (the
    due date or None, the late submissions as rows of student, seconds_late, penalty)."""
    counts = histogram(totals, possible, 5)
    bins = [f"{low:g} to {high:g}" for low, high in bin_edges(possible, 5)]
    rates = [(f"{t['notebook'].split('_', 1)[0]}/{t['test'].removeprefix('test_')}",
              round(100 * t["passed"] / max(t["passed"] + t["failed"], 1))) for t in tests]
    named = [m for m in mistakes if m.get("kind", "mistake") == "mistake"]
    unwritten = [m for m in mistakes if m.get("kind", "mistake") != "mistake"]
    parts = [f"<h1>Class report: {for_html(assignment)}</h1>",
             f"<p>{len(totals)} students; total score out of {possible:g}"
             + (f"; mean {sum(totals) / len(totals):.1f}" if totals else "") + ".</p>",
             "<h2>Total scores</h2><figure>",
             _bars("Students per range of total score", list(zip(bins, counts)), max(counts, default=0) or 1, ""),
             "<figcaption>Students per range of total score (the table below has the same numbers).</figcaption>"
             "</figure>",
             _table("Students per range of total score", ["total score", "students"],
                    [[b, c] for b, c in zip(bins, counts)], frozenset({1})),
             "<h2>Each test's pass rate</h2><figure>",
             _bars("Percentage of the students who handed the notebook in and passed each test", rates, 100, "%"),
             "<figcaption>Pass rate per test, among the students who handed the notebook in.</figcaption></figure>",
             _table("Each test (tests.csv has their points, by notebook and test)",
                    ["test", "passed", "failed", "pass rate"],
                    [[name, t["passed"], t["failed"], f"{r}%"] for t, (name, r) in zip(tests, rates)],
                    frozenset({1, 2, 3})),
             "<h2>Named mistakes</h2>",
             _table("How many students made each named mistake, most first", ["mistake", "notebook", "students"],
                    [[m["mistake"], m["notebook"], m["students"]] for m in named], frozenset({2}), frozenset({1}))
             if named else "<p>No named mistake.</p>"]
    if unwritten:
        parts += ["<h2>Left unwritten</h2><p>Functions still raising the release's <code>NotImplementedError</code>: "
                  "not attempted, so not counted among the mistakes.</p>",
                  _table("How many students left each function unwritten", ["function", "notebook", "students"],
                         [[m["mistake"].rsplit(": ", 1)[0] if ": " in m["mistake"] else m["mistake"], m["notebook"],
                           m["students"]] for m in unwritten], frozenset({2}), frozenset({0, 1}))]
    parts += _late_section(*late)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{content_security_policy(STYLE)}\">"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Class report: {for_html(assignment)}</title><style>{STYLE}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>")


def late_by(seconds: float) -> str:
    """"3 d 04:05:06", "04:05:06" or "2.5 s": how late, for a person."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    days, rest = divmod(int(seconds), 86400)
    clock = f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return f"{days} d {clock}" if days else clock


def _late_section(duedate, late: list[dict]) -> list[str]:
    """Who handed in late and by how much (this table alone names students: the ones to follow up with), latest
    first; nothing when there is no due date and no one was late."""
    if duedate is None and not late:
        return []
    due = f"Due {for_html(duedate)} UTC" if duedate is not None else "No due date"
    if not late:
        return ["<h2>Late submissions</h2>", f"<p>{due} (with each student's extension): no submission was late.</p>"]
    rows = [[r["student"], late_by(r["seconds_late"]), f"{r['penalty']:g}"]
            for r in sorted(late, key=lambda r: -r["seconds_late"])]
    return ["<h2>Late submissions</h2>",
            f"<p>{due} (with each student's extension): {len(late)} submission(s) late. The penalty, in points, is "
            "the course's late-submission plugin's (nbgrader_config.py), over the notebooks; grades_by_student.csv "
            "has each time handed in and the score after the penalty.</p>",
            _table("Late submissions, latest first", ["student", "late by", "penalty"], rows, frozenset({2}),
                   names=frozenset())]


def write(path: Path, assignment: str, totals: list[float], possible: float, tests: list[dict],
          mistakes: list[dict], late: tuple = (None, [])) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page(assignment, totals, possible, tests, mistakes, late), encoding="utf-8")
    return path
