"""Keyboard reach of the built site (a measurement, not a test).

For every page, on a desktop (1280 px) and a phone (390 px) screen, in Debian's headless Chromium
driven by Playwright (as tests/test_site.py does): how many key presses (Tab and Enter) a keyboard
user needs, from page load, to put the focus on each interactive element:

* viewer: a head viewer's controls (its selects, "Values as a table");
* quiz: an answer's ``<summary>`` (sphinx-design dropdowns);
* download: the header's download button and the ``{download}`` links;
* copy: the code cells' copy buttons; other: every other focusable element.

Two routes are counted and the shorter one kept:

1. Tab only: the element's rank in the page's Tab order;
2. one jump: Tab to a link into the same page (a skip link, or any other in-page link among the
   first ``--jump-within`` Tab stops), Enter, then Tab until the element has the focus.

Each element's figures: ``tab`` (route 1), ``best`` (the shorter route), and ``no_skip``: the
shorter route for a reader who does not use the skip links (hidden until focused), only the
links that the page shows (e.g. the list under the title, site/skip_links.py).

    .venv/bin/python bench/keyboard_reach.py [--pages intro 04_complete_guide] [--json out.json] [--site DIR]

Needs the built site (_build/html) and Chromium (`make browser`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_site  # noqa: E402
from test_site import (DESKTOP, PHONE, SITE, _pages, _rel, _Watch, chromium_path,  # noqa: E402
                       launch_chromium, serve_site)

VIEWS = {"desktop": DESKTOP, "phone": PHONE}
KINDS = {   # first match wins
    "viewer": "div.head-selector select, div.head-selector summary, div.head-selector [tabindex]",
    "quiz": "details.sd-dropdown > summary",
    "download": ".dropdown-download-buttons > button, a.download",
    "copy": "button.copybtn",
}
# Tags every focusable element with its number (data-kr) and returns [kind, label] for each.
TAG_JS = """kinds => {
  const all = document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]');
  return [...all].map((el, i) => {
    el.dataset.kr = i;
    const kind = Object.keys(kinds).find(k => el.matches(kinds[k])) || 'other';
    const here = el.tagName === 'A' && el.hash && el.href.split('#')[0] === location.href.split('#')[0];
    const name = el.getAttribute('aria-label') || el.title || el.textContent.trim() || el.tagName;
    return [kind, name.replace(/\s+/g, ' ').slice(0, 60), here, !!el.closest('.skip-link')];
  });
}"""
FOCUSED = "() => { const a = document.activeElement; return a && a.dataset.kr !== undefined ? Number(a.dataset.kr) : null; }"


def tab_order(page, limit: int) -> list[int | None]:
    """The data-kr of each Tab stop, in order, until the focus comes back or `limit` presses."""
    order: list[int | None] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUSED)
        if now is not None and now in order:
            break
        order.append(now)
    return order


def load(watch, rel: str):
    page = watch.open(rel)
    page.wait_for_function("() => [...document.querySelectorAll('div.head-selector')]"
                           ".every(d => d.dataset.hsReady)")
    return page, page.evaluate(TAG_JS, KINDS)


def measure(watch, rel: str, jump_within: int, after_jump: int) -> list[dict]:
    """[{kind, label, tab, best, no_skip}] for every element that the keyboard reaches."""
    page, elements = load(watch, rel)
    order = tab_order(page, 1000)
    best = {kr: n + 1 for n, kr in enumerate(order) if kr is not None}
    tab_only, no_skip = dict(best), dict(best)
    for n, kr in enumerate(order[:jump_within]):
        if kr is None or not elements[kr][2]:
            continue
        page, _ = load(watch, rel)
        page.locator(f"[data-kr='{kr}']").focus()
        page.keyboard.press("Enter")
        for m, there in enumerate(tab_order(page, after_jump)):
            if there is not None:
                cost = (n + 1) + 1 + (m + 1)
                best[there] = min(best.get(there, 10**6), cost)
                if not elements[kr][3]:
                    no_skip[there] = min(no_skip.get(there, 10**6), cost)
    return [{"kind": elements[kr][0], "label": elements[kr][1], "tab": tab_only[kr], "best": best[kr],
             "no_skip": no_skip.get(kr, tab_only[kr])} for kr in sorted(best)]


def summary(rows: list[dict]) -> str:
    parts = []
    for kind in [*KINDS, "other"]:
        costs = [r["best"] for r in rows if r["kind"] == kind]
        tabs = [r["tab"] for r in rows if r["kind"] == kind]
        no_skip = [r.get("no_skip", r["tab"]) for r in rows if r["kind"] == kind]
        if costs:
            parts.append(f"{kind} x{len(costs)}: first {min(costs)} (without skip links {min(no_skip)}, "
                         f"Tab only {min(tabs)}), "
                         f"median {statistics.median(costs):g}, max {max(costs)}")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="*", help="page stems (default: every page)")
    parser.add_argument("--jump-within", type=int, default=30, help="in-page links tried: the first N Tab stops")
    parser.add_argument("--after-jump", type=int, default=1000, help="Tab presses recorded after a jump")
    parser.add_argument("--site", type=Path, default=SITE, help="the built site (default: _build/html)")
    parser.add_argument("--json", type=Path, help="write every element's figures here")
    args = parser.parse_args()
    if not args.site.is_dir():
        sys.exit(f"{args.site} does not exist: build the site first")
    test_site.SITE = args.site      # _pages() and serve_site() read it
    pages = [p for p in _pages() if not args.pages or p.stem in args.pages]
    results = {}
    if chromium_path() is None:
        sys.exit("Chromium is missing: `make browser`")
    with launch_chromium(chromium_path()) as chromium, serve_site() as base:
        for view, options in VIEWS.items():
            for page_file in pages:
                rel = _rel(page_file)
                watch = _Watch(chromium, base, **options)
                try:
                    rows = measure(watch, rel, args.jump_within, args.after_jump)
                finally:
                    watch.close()
                results[f"{view} {rel}"] = rows
                print(f"{view:7s} {rel:38s} {summary(rows)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
