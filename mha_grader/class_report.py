"""The class report: one static HTML page for the instructor, beside the feedback folder and the CSV files
(class_report.html in the course folder: it quotes mistake labels, which may hold a student's text, so it
is kept out of feedback/, whose pages go to the students).

The distribution of the students' total scores and each test's pass rate as figures (inline SVG
drawn here: no script, no request), each figure with a text alternative and the same numbers in a
table with real headers; the named mistakes with how many students made each. Counts only: the
page names no student. It reads on a phone (the figures scale to the width, tables scroll) and in
dark mode, with text contrast of at least 4.5:1, under the same Content Security Policy as the
feedback pages (no script of any kind).
"""
from pathlib import Path

from .feedback import content_security_policy
from .text import for_html

STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#1b1b1b;background:#fff}
figure{margin:1rem 0}svg{width:100%;height:auto;max-width:40rem}figcaption{color:#444}
.wrap{overflow-x:auto}table{border-collapse:collapse;margin:.5rem 0}
th,td{border:1px solid #767676;padding:.2rem .5rem;text-align:left}td.n,th.n{text-align:right}
.bar{fill:#1f5fa8}.axis{stroke:#555}.label{fill:#1b1b1b;font-size:12px}
@media (prefers-color-scheme: dark){body{background:#121212;color:#e6e6e6}figcaption{color:#bbb}
.bar{fill:#7fb2ee}.label{fill:#e6e6e6}th,td{border-color:#8a8a8a}}
"""


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
    """A horizontal bar chart as inline SVG: one bar per (name, value), values out of ``top``."""
    row, left, width = 22, 165, 155  # 370 units wide: about 1:1 on a phone, labels at 12 px
    height = row * len(items) + 10
    parts = [f"<svg viewBox='0 0 {left + width + 50} {height}' role='img' aria-label='{for_html(label)}'>"
             f"<title>{for_html(label)}</title>"
             f"<line class='axis' x1='{left}' y1='0' x2='{left}' y2='{height}'/>"]
    for i, (name, value) in enumerate(items):
        y = i * row + 5
        w = width * value / top if top else 0
        parts.append(f"<text class='label' x='{left - 6}' y='{y + 14}' text-anchor='end'>{for_html(name, 26)}</text>"
                     f"<rect class='bar' x='{left}' y='{y}' width='{w:.1f}' height='{row - 6}'/>"
                     f"<text class='label' x='{left + w + 4:.1f}' y='{y + 14}'>{value:g}{unit}</text>")
    return "".join(parts) + "</svg>"


def _table(caption: str, heads: list[str], rows: list[list]) -> str:
    head = "".join(f"<th scope='col'{' class=n' if i else ''}>{for_html(h)}</th>" for i, h in enumerate(heads))
    body = "".join("<tr><th scope='row'>" + for_html(r[0]) + "</th>"
                   + "".join(_cell(v) for v in r[1:]) + "</tr>" for r in rows)
    return (f"<div class='wrap'><table><caption>{for_html(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _cell(value) -> str:
    return f"<td{' class=n' if isinstance(value, int | float) else ''}>{for_html(value)}</td>"


def page(assignment: str, totals: list[float], possible: float, tests: list[dict], mistakes: list[dict]) -> str:
    counts = histogram(totals, possible, 5)
    bins = [f"{low:g} to {high:g}" for low, high in bin_edges(possible, 5)]
    rates = [(f"{t['notebook'].split('_', 1)[0]}/{t['test'].removeprefix('test_')}",
              round(100 * t["passed"] / max(t["passed"] + t["failed"], 1))) for t in tests]
    parts = [f"<h1>Class report: {for_html(assignment)}</h1>",
             f"<p>{len(totals)} students; total score out of {possible:g}"
             + (f"; mean {sum(totals) / len(totals):.1f}" if totals else "") + ".</p>",
             "<h2>Total scores</h2><figure>",
             _bars("Students per range of total score", list(zip(bins, counts)), max(counts, default=0) or 1, ""),
             "<figcaption>Students per range of total score (the table below has the same numbers).</figcaption>"
             "</figure>",
             _table("Students per range of total score", ["total score", "students"],
                    [[b, c] for b, c in zip(bins, counts)]),
             "<h2>Each test's pass rate</h2><figure>",
             _bars("Percentage of the students who handed the notebook in and passed each test", rates, 100, "%"),
             "<figcaption>Pass rate per test, among the students who handed the notebook in.</figcaption></figure>",
             _table("Each test", ["test", "points", "passed", "failed", "pass rate"],
                    [[f"{t['notebook']}/{t['test']}", f"{t['points']:g}", t["passed"], t["failed"], f"{r}%"]
                     for t, (_, r) in zip(tests, rates)]),
             "<h2>Named mistakes</h2>",
             _table("How many students made each named mistake", ["mistake", "notebook", "students"],
                    [[m["mistake"], m["notebook"], m["students"]] for m in mistakes[:200]])
             if mistakes else "<p>No named mistake.</p>"]
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{content_security_policy(STYLE)}\">"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Class report: {for_html(assignment)}</title><style>{STYLE}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>")


def write(path: Path, assignment: str, totals: list[float], possible: float, tests: list[dict],
          mistakes: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page(assignment, totals, possible, tests, mistakes), encoding="utf-8")
    return path
