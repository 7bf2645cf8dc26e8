"""Search snippets when the site is opened from disk (``file://``, the README's first suggestion).

Sphinx's search page shows each hit's snippet by fetching the hit's page; a browser refuses
``fetch`` on ``file://`` (one CORS error per hit), so the hits came as bare titles. After the
build, :func:`write_pages` writes ``_static/search-pages.js``: every page's main text (its
sections, with their ids, so an anchored hit gets its section), formulas as their TeX. On
``file://`` only, :data:`JS` (in ``language_data.js``, which only the search page loads) loads
that file and answers the search's page fetches from it; over HTTP nothing changes.
"""
from __future__ import annotations

import json
from pathlib import Path

from bs4 import BeautifulSoup

TARGET = "_static/search-pages.js"
# Tags kept (with their id only), so that text stays apart and sections can be found by id.
BLOCKS = {"section", "div", "p", "li", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "table", "tr",
          "td", "th", "dt", "dd", "blockquote", "summary", "details", "figure", "figcaption"}
DROPPED = ["script", "style", "svg", "img", "button", "template", "noscript", ".headerlink",
           ".head-selector-data", "mjx-assistive-mml"]


def page_text(html_text: str) -> str | None:
    """The main content of a page as light HTML: ``[role=main]``, block tags with their id,
    formulas as ``\\(TeX\\)`` (which the search's snippet code turns into readable text)."""
    soup = BeautifulSoup(html_text, "html.parser")
    main = soup.select_one('[role="main"]')
    if main is None:
        return None
    for math in main.select("[data-tex]"):
        math.string = f"\\({math['data-tex']}\\)"
    for tag in main.select(", ".join(DROPPED)):
        tag.decompose()
    for tag in main.find_all(True):
        if tag.name in BLOCKS:
            tag.attrs = {"id": tag["id"]} if tag.get("id") else {}
        else:
            tag.unwrap()
    main.attrs = {"role": "main"}
    return str(main)


def write_pages(site: Path) -> int:
    """Write ``_static/search-pages.js`` for every page of ``site``; returns its size in bytes."""
    pages = {}
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site).as_posix()
        if rel.startswith(("_static/", "_sources/", "_images/")):
            continue
        text = page_text(path.read_text(encoding="utf-8"))
        if text:
            pages[rel] = text
    body = "window.COURSE_SEARCH_PAGES = " + json.dumps(pages, ensure_ascii=False, separators=(",", ":")) + ";\n"
    (site / TARGET).write_text(body, encoding="utf-8")
    return len(body.encode("utf-8"))


# Appended to language_data.js (site/search_math.py): fetches of this site's pages, on file://
# only, are answered from search-pages.js.
JS = r"""
(function () {
  if (location.protocol !== "file:" || !window.fetch) { return; }
  var root = new URL(document.documentElement.dataset.content_root || "./", location.href).href;
  var pages = null;
  function load() {
    pages = pages || new Promise(function (resolve) {
      var script = document.createElement("script");
      script.src = root + "_static/search-pages.js";
      script.onload = function () { resolve(window.COURSE_SEARCH_PAGES || {}); };
      script.onerror = function () { resolve({}); };
      document.head.appendChild(script);
    });
    return pages;
  }
  var fetchOverNetwork = window.fetch;
  window.fetch = function (resource) {
    var url = new URL(String(resource && resource.url || resource), location.href).href.split(/[?#]/)[0];
    if (url.indexOf(root) !== 0 || !/\.html$/.test(url)) { return fetchOverNetwork.apply(this, arguments); }
    return load().then(function (found) {
      return new Response(found[url.slice(root.length)] || "", { headers: { "Content-Type": "text/html" } });
    });
  };
})();
"""
