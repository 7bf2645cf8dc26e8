"""The built site in a real browser: Playwright drives Debian's Chromium over _build/html.

Everything is served from a loopback HTTP server started here; Chromium is told that no other
host exists (--host-resolver-rules) and every request to another host is aborted and reported.

* the site tests are skipped (with the reason) only when _build/html does not exist (`make test`
  builds it first); the widget's Python tests at the end always run;
* when Chromium is missing the browser tests are skipped on a workstation, and fail when CI=true.
"""
from __future__ import annotations

import contextlib
import functools
import html
import http.server
import json
import os
import re
import shutil
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "site"))
import static_server  # noqa: E402  (make serve's handler: pre-compressed files, as a static host)

# The built site (another build can be checked with MHA_SITE=/path/to/html, e.g. an older one).
SITE = Path(os.environ.get("MHA_SITE") or ROOT / "_build" / "html")
SEARCH_TERM = "softmax"           # in chapters/intro.md, the page the site test relies on
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# Elements whose URL the browser fetches while loading a page (an <a href> is only a link).
LOADED = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src",
          "video": "src", "embed": "src", "object": "data", "link": "href"}

needs_site = pytest.mark.skipif(
    not SITE.is_dir(), reason=f"{SITE} does not exist: build the site first (`make book`)")


def _pages() -> list[Path]:
    """Every HTML page of the site (not the theme's assets or the copied sources)."""
    skip = {"_static", "_sources", "_images", "mathjax"}
    return sorted(p for p in SITE.rglob("*.html")
                  if not skip & set(p.relative_to(SITE).parts[:-1]))


def _rel(page: Path) -> str:
    return page.relative_to(SITE).as_posix()


# ---------------------------------------------------------------------------------------------
# Static checks of the HTML files: links, anchors, external hosts, downloads
# ---------------------------------------------------------------------------------------------
class _Scan(HTMLParser):
    """Collects the ids (anchors) of a page and every URL it links to or loads."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str, str]] = []    # (tag, attribute, url)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href") is not None:
            self.urls.append((tag, "href", a["href"]))
        elif tag in LOADED and a.get(LOADED[tag]):
            self.urls.append((tag, LOADED[tag], a[LOADED[tag]]))
        if tag in ("img", "source") and a.get("srcset"):
            for part in a["srcset"].split(","):
                self.urls.append((tag, "srcset", part.strip().split(" ")[0]))


@functools.cache
def _scan(path: Path) -> _Scan:
    scan = _Scan()
    scan.feed(path.read_text(encoding="utf-8", errors="replace"))
    return scan


@needs_site
def test_site_has_the_book_pages():
    pages = {_rel(p) for p in _pages()}
    toc = (ROOT / "_toc.yml").read_text()
    expected = {f"{m}.html" for m in re.findall(r"(?:root|file):\s*(\S+)", toc)}
    assert expected <= pages, f"pages in _toc.yml missing from the site: {expected - pages}"
    assert {"search.html", "genindex.html", "index.html"} <= pages


@needs_site
def test_no_broken_internal_link_and_nothing_loaded_from_another_host():
    broken, external = [], []
    for page in _pages():
        for tag, attr, url in _scan(page).urls:
            parts = urlsplit(url)
            if parts.scheme in ("mailto", "javascript", "data", "tel"):
                continue
            if parts.scheme or url.startswith("//"):
                if tag != "a":
                    external.append(f"{_rel(page)}: <{tag} {attr}={url!r}>")
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{_rel(page)}: {url!r} (no file {target})")
                continue
            if parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _scan(target).ids:
                    broken.append(f"{_rel(page)}: {url!r} (no anchor in {target.name})")
    assert not (external or broken), (
        "resources loaded from another host:\n" + "\n".join(external)
        + "\nbroken internal links:\n" + "\n".join(broken))


@needs_site
def test_css_loads_nothing_from_another_host():
    pattern = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])(?:https?:)?//""", re.I)
    hits = [p.relative_to(SITE).as_posix() for p in SITE.rglob("*.css")
            if pattern.search(p.read_text(encoding="utf-8", errors="replace"))]
    assert not hits, f"stylesheets with external url()/@import: {hits}"


@needs_site
def test_every_chapter_downloads_as_ipynb():
    """Every page whose source is a notebook (the intro and the chapters) offers its .ipynb."""
    notebooks = [md for md in sorted((ROOT / "chapters").glob("*.md")) if "kernelspec:" in md.read_text()]
    assert len(notebooks) >= 6, [md.name for md in notebooks]
    for page in (SITE / "chapters" / f"{md.stem}.html" for md in notebooks):
        links = [u for t, _, u in _scan(page).urls if t == "a" and u.endswith(".ipynb")]
        assert links, f"{_rel(page)}: no .ipynb download link"
        notebook = (page.parent / links[0]).resolve()
        assert notebook.is_file(), f"{_rel(page)}: {links[0]} does not exist"
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        assert nb.get("nbformat") == 4 and nb.get("cells"), f"{notebook} is not a notebook"


# ---------------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------------
class _QuietHandler(static_server.Handler):
    """`make serve`'s handler: each file as its .br or .gz when the browser accepts it."""
    answered: list | None = None      # (path, status) of every request, when a test asks for them

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def log_request(self, code="-", size="-"):
        if self.answered is not None:
            self.answered.append((self.path, int(code)))


@contextlib.contextmanager
def serve_site(answered: list | None = None):
    """The built site on a loopback HTTP server; yields its base URL. Each request's (path,
    status) is appended to ``answered`` if given."""
    handler = functools.partial(type("Handler", (_QuietHandler,), {"answered": answered}), directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def chromium_path() -> str | None:
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    return exe if Path(exe).is_file() else None


@contextlib.contextmanager
def launch_chromium(exe: str):
    """Debian's headless Chromium under Playwright, told that no other host exists."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # Playwright gives the browser a fresh temporary profile (--user-data-dir) itself.
        chromium = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def server():
    with serve_site() as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    exe = chromium_path()
    if exe is None:
        message = ("Debian's Chromium is not installed (`make browser`, or "
                   "`apt-get install chromium`); the browser tests need it")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    with launch_chromium(exe) as chromium:
        yield chromium


class _Watch:
    """A browser page that records console errors, page errors, failed and foreign requests."""

    def __init__(self, browser, base, **context_options):
        self.base = base
        self.context = browser.new_context(**context_options)
        self.problems: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.leaving = False  # (while open() navigates away, the old page's requests are cut short)
        self.page.on("requestfailed", self._failed)
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.base) or url.split(":", 1)[0] in ("data", "blob", "about"):
            route.continue_()
        else:
            self.problems.append(f"request to another host: {url}")
            route.abort()

    def _failed(self, request):
        if self.leaving and request.failure == "net::ERR_ABORTED":
            return  # e.g. the browser's own favicon fetch, aborted by the test's next navigation
        self.problems.append(f"request failed: {request.url} ({request.failure})")

    def _console(self, msg):
        if msg.type == "error":
            self.problems.append(f"console error: {msg.text}")

    def open(self, path):
        from playwright.sync_api import Error

        self.leaving = True
        try:
            self.page.goto(self.base + path, wait_until="load")
        finally:
            self.leaving = False
        for attempt in range(3):  # index.html redirects (meta refresh) to the intro page
            try:
                self.page.wait_for_load_state("load")
                self.page.wait_for_load_state("networkidle")   # fonts, images
                return self.page
            except Error as exc:
                if "context was destroyed" not in str(exc) or attempt == 2:
                    raise
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def watch(browser, server):
    w = _Watch(browser, server)
    yield w
    w.close()


PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "has_touch": True}


@pytest.fixture
def phone(browser, server):
    """A 390 px wide phone screen whose system asks for dark mode (the theme's default follows it)."""
    w = _Watch(browser, server, color_scheme="dark", **PHONE)
    yield w
    w.close()


# ---------------------------------------------------------------------------------------------
# Every page in three views: loads cleanly offline, no TeX left, 0 axe-core violations, weight
# ---------------------------------------------------------------------------------------------
AXE = ROOT / ".cache" / "node" / "node_modules" / "axe-core" / "axe.min.js"   # `make site-node`
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
DESKTOP = {"viewport": {"width": 1280, "height": 900}}
VIEWS = {"desktop light": {**DESKTOP, "color_scheme": "light"},
         "desktop dark": {**DESKTOP, "color_scheme": "dark"},
         "phone dark": {**PHONE, "color_scheme": "dark"}}
# Bytes, uncompressed, with everything a page loads: a page's bytes arrive within 1.0 s at
# 10 Mbit/s (1.25 MB a second, less the protocols' share). They were 755 kB and 1.45 MB (chapter 1)
# before the stylesheets were cut to the rules the pages use (site/css_purge.py).
LANDING_BUDGET = 500_000       # the site's root page, its forward to chapters/intro.html and all that loads
PAGE_BUDGET = 1_100_000        # every page
RAW_TEX = re.compile(r"\\[(\[]|\\frac|\\mathbb|\\sqrt|\$\$")
# What each page loads, cold: every resource's decoded (uncompressed) size, after a scroll to the
# bottom so that lazily loaded images count too.
WEIGHT_JS = """async () => {
  window.scrollTo(0, document.body.scrollHeight);
  await new Promise(r => setTimeout(r, 300));
  return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
    .map(e => [e.name, e.decodedBodySize, e.transferSize]);
}"""


def _axe(page) -> list[str]:
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run `make site-node` (make book does)")
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
                          ".then(r => r.violations.map(v => [v.id, v.impact, v.nodes.map(n => n.target.join(' '))]))",
                          AXE_TAGS)
    return [f"{rule} ({impact}): {', '.join(nodes[:4])}" + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
            for rule, impact, nodes in found]


def _weight(page, rel: str, log: list[str]) -> int:
    entries = page.evaluate(WEIGHT_JS)
    total = sum(size for _, size, _ in entries)
    sent = sum(s for _, _, s in entries)
    largest = sorted(entries, key=lambda e: -e[1])[:4]
    log.append(f"{rel:38s} {total / 1e3:6.0f} kB ({sent / 1e3:4.0f} kB sent compressed) in {len(entries):2d} "
               "requests; largest: "
               + ", ".join(f"{urlsplit(u).path.rsplit('/', 1)[-1]} {s / 1e3:.0f} kB" for u, s, _ in largest))
    assert all(s > 0 for _, _, s in entries), f"{rel}: a response came from a cache: not a cold visit"
    return total


@needs_site
@pytest.mark.parametrize("view", list(VIEWS))
def test_every_page_in_three_views_is_clean_typeset_accessible_and_light(browser, server, view):
    """Each page in a fresh (cold) browser: no console error, no foreign or failed request, no TeX
    left on screen, 0 axe-core violations (WCAG 2.0/2.1 A and AA; in the dark view with every
    <details> open); in the desktop light view also the weight of everything it loads, within the
    budgets (printed with `pytest -s`, and written to _build/page-weights.txt): every byte a page
    loads, uncompressed; the site is served as `make serve` serves it (compressed where accepted)."""
    problems, weights, log = [], {}, []
    for page_file in _pages():
        rel = _rel(page_file)
        watch = _Watch(browser, server, **VIEWS[view])
        try:
            page = watch.open(rel)
            problems += [f"{rel}: {p}" for p in watch.problems]
            visible = page.evaluate("() => { const b = document.body.cloneNode(true);"   # prose, not code
                                    " b.querySelectorAll('pre, code, script').forEach(e => e.remove());"
                                    " return b.textContent; }")
            if RAW_TEX.search(visible):
                problems.append(f"{rel}: raw TeX on screen: {RAW_TEX.search(visible)[0]!r}")
            if view == "desktop dark":   # everything folded open too: code, answers, value tables
                page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
                page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')")
            problems += [f"{rel}: {v}" for v in _axe(page)]
            if view == "desktop light":
                weights[page.url] = _weight(page, rel, log)
        finally:
            watch.close()
    landing = None
    if log:   # in the test's output (pytest -s) and in a file that CI can keep
        # The root page forwards to the intro (index.html's own bytes are not in the intro's entries).
        landing = (SITE / "index.html").stat().st_size + next(
            w for url, w in weights.items() if url.endswith("chapters/intro.html"))
        table = ("page weights (uncompressed, cold, all resources)\n" + "\n".join(log)
                 + f"\nlanding page (index.html, then chapters/intro.html): {landing:,} bytes with all it loads"
                 f" (budget {LANDING_BUDGET:,}); every page's budget {PAGE_BUDGET:,}\n")
        (SITE.parent / "page-weights.txt").write_text(table, encoding="utf-8")
        print("\n" + table)
    assert not problems, f"{view}:\n" + "\n".join(problems)
    if landing is not None:
        assert landing <= LANDING_BUDGET, f"landing page {landing:,} bytes > {LANDING_BUDGET:,}"
        heavy = {url: w for url, w in weights.items() if w > PAGE_BUDGET}
        assert not heavy, f"pages over {PAGE_BUDGET:,} bytes: {heavy}"


# ---------------------------------------------------------------------------------------------
# Only the CSS rules the pages use (site/css_purge.py): nothing a reader can reach loses its style
# ---------------------------------------------------------------------------------------------
FULL_CSS = SITE.parent / "css-full"    # every stylesheet as it was before the purge
PURGE_VIEWS = {f"{label} {scheme}": {"viewport": {"width": width, "height": 800}, "color_scheme": scheme,
                                     "has_touch": width < 992}
               for label, width in (("desktop", 1280), ("390 px", 390), ("320 px", 320))
               for scheme in ("light", "dark")}
# One hash per element (and per ::before/::after that draws) of every standard property that the
# full stylesheets set (shorthands as their longhands). Left out: what lies inside a formula
# (MathJax's own elements, styled by the page's inline MathJax sheet, which the purge leaves alone)
# and, in the scope "chrome", the article (after a step that changes only the header, a drawer,
# a dialog or a menu). Tooltips are compared in the step that shows one ("chrome+tooltip"): after
# the others, one may be fading in or out in either tab (the theme shows them on focus and hover). Returns [descriptions, hashes], or the values at `detail` indices.
# An element is described by its tag, id (numbers as N: Bootstrap draws its ids at random) and
# classes, and its parent's: where the two tabs' scripts left an element in different states (the theme's scroll spy marks the section in view
# from IntersectionObserver callbacks, whose timing differs), its style is not compared.
STYLES_JS = """([declared, scope, detail]) => {
  const probe = document.createElement('div').style;
  for (const p of declared) probe.setProperty(p, 'initial');
  const props = Array.from(probe);
  const hash = s => { let h = 2166136261; for (let i = 0; i < s.length; i++) { h = Math.imul(h ^ s.charCodeAt(i), 16777619); } return h >>> 0; };
  const elements = Array.from(document.querySelectorAll('*')).filter(el =>
    !(el.parentElement && el.parentElement.closest('mjx-container'))
    && !(scope !== 'page' && el.closest('article.bd-article'))
    && (scope === 'chrome+tooltip' || !el.closest('.tooltip')));
  const values = el => {
    const out = {}, cs = getComputedStyle(el);
    for (const p of props) out[p] = cs.getPropertyValue(p);
    for (const pseudo of ['::before', '::after']) {
      const ps = getComputedStyle(el, pseudo);
      if (ps.content !== 'none' && ps.content !== 'normal') for (const p of props) out[pseudo + p] = ps.getPropertyValue(p);
    }
    return out;
  };
  const box = el => { const r = el.getBoundingClientRect(); return [r.x, r.y, r.width, r.height].map(Math.round).join(' '); };
  if (detail) return detail.map(i => ({...values(elements[i]), box: box(elements[i])}));
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id.replace(/[0-9]+/g, 'N') : '')
    + Array.from(el.classList).map(c => '.' + c).join('');
  return [elements.map(el => (el.parentElement ? name(el.parentElement) + ' > ' : '') + name(el)),
          elements.map(el => hash(Object.values(values(el)).join(';')))];
}"""
# Resolves once no finite animation or transition is running (the theme fades menus and dialogs).
SETTLED_JS = """() => document.fonts.status === 'loaded'
                      && document.getAnimations().every(a => a.playState !== 'running'
                                                        || a.effect.getTiming().iterations === Infinity)"""


def _declared_properties() -> list[str]:
    """Every standard property that a declaration of the full stylesheets sets."""
    import tinycss2

    found: set[str] = set()

    def walk(rules):
        for rule in rules:
            if rule.type == "qualified-rule":
                found.update(d.lower_name for d in tinycss2.parse_declaration_list(rule.content)
                             if d.type == "declaration" and not d.name.startswith("--"))
            elif rule.type == "at-rule" and rule.content is not None and rule.lower_at_keyword != "keyframes":
                walk(tinycss2.parse_rule_list(rule.content))

    for sheet in FULL_CSS.rglob("*.css"):
        walk(tinycss2.parse_stylesheet(sheet.read_text(encoding="utf-8")))
    return sorted(found)


def _with_full_css(watch: _Watch) -> _Watch:
    """The same page with the stylesheets before the purge (a later route wins over _Watch's)."""
    def full(route):
        original = FULL_CSS / unquote(urlsplit(route.request.url).path).lstrip("/")
        if original.is_file():
            route.fulfill(body=original.read_bytes(), content_type="text/css")
        else:
            route.fallback()
    watch.context.route(re.compile(r"\.css(\?|$)"), full)
    return watch


def _visible(page, selector):
    return next((e for e in page.locator(selector).all() if e.is_visible()), None)


def _shown(page, selector) -> bool:
    """Whether ``selector`` becomes visible within 4 s."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.locator(selector).first.wait_for(state="visible", timeout=4_000)
        return True
    except PlaywrightTimeout:
        return False


def _click(selector, opened=None):
    def step(page):
        target = _visible(page, selector)
        if target is None:
            return False
        for _ in range(5):  # (a click the page's script missed on a busy machine is clicked again, as a reader would)
            target.click()
            if not opened or _shown(page, opened):
                return True
        page.locator(opened).first.wait_for(state="visible", timeout=4_000)  # (its error names what never showed)
        return True
    return step


def _switch_to_dark(page):
    """The theme's switch clicked until the page is dark (it cycles light, dark, system; where a tab starts on the
    cycle depends on when its script ran, so one click leaves two tabs in different modes)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    page.wait_for_function("() => !document.querySelector('dialog[open]')")  # (the drawer closed by Escape)
    for _ in range(6):
        button = _visible(page, ".theme-switch-button")
        if button is None:
            return False
        mode = page.evaluate("() => document.documentElement.dataset.mode")
        button.click()
        try:  # (a click that came while the closed drawer still held the page is clicked again)
            page.wait_for_function("m => document.documentElement.dataset.mode !== m", arg=mode, timeout=3_000)
        except PlaywrightTimeout:
            continue
        if page.evaluate("() => document.documentElement.dataset.mode === 'dark'"):
            return True
    return False


def _open_folds(page):
    """A quiz opened as a reader does (a click), then every other fold (code, answers, tables), and
    the head viewer moved to its second head."""
    quiz = _visible(page, "details.sd-dropdown > summary")
    if quiz is not None:
        quiz.click()
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    head = page.locator("select.head-selector-head").first
    if head.count():
        head.select_option(index=1)
    return True


def _hover(selector, shown):
    def step(page):
        target = _visible(page, selector)
        if target is None:
            return False
        target.hover()
        page.locator(shown).first.wait_for(state="visible", timeout=5_000)
        return True
    return step


def _key(key, shown=None):
    def step(page):
        page.keyboard.press(key)
        if shown:
            page.locator(shown).first.wait_for(state="visible", timeout=5_000)
        return True
    return step


def _type_search(page):
    _key("/", "#pst-search-dialog")(page)
    page.keyboard.type(SEARCH_TERM)
    return True


def _scroll(page):
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight / 2)")
    page.wait_for_timeout(300)    # the theme marks a scrolled page from an IntersectionObserver
    return True


# What a reader does, in order, with the scope to compare after it: (name, scope, step). A step
# returns False when the page has no such control at this width (the same in both tabs).
READER_STEPS = [
    ("as loaded", "page", lambda page: True),
    ("the skip link focused (Tab)", "chrome", _key("Tab")),
    ("a quiz clicked open, every fold open, the head viewer on head 2", "page", _open_folds),
    ("scrolled halfway", "chrome", _scroll),
    ("a header button's tooltip shown", "chrome+tooltip", _hover(".bd-header-article [data-bs-toggle='tooltip']", ".tooltip.show")),
    ("the download menu open", "chrome", _click(".bd-header-article .dropdown-toggle", ".dropdown-menu.show")),
    ("the download menu closed (Escape)", "chrome", _key("Escape")),
    ("the chapters drawer toggled", "chrome", _click(".primary-toggle")),
    ("the chapters drawer closed (Escape)", "chrome", _key("Escape")),
    ("the contents drawer toggled", "chrome", _click(".secondary-toggle")),
    ("the contents drawer closed (Escape)", "chrome", _key("Escape")),
    ("the colour mode switched", "chrome", _switch_to_dark),
    ("the search opened (/) with a word typed", "chrome", _type_search),
]


def _same_styles(full_page, purged_page, declared, scope, where, settle_ms: int = 1000) -> list[str]:
    """What differs between the two tabs' computed styles; a difference is measured again after ``settle_ms``
    (a layout the browser had not finished in one tab, e.g. after the colour mode's switch on a busy machine,
    is not the purge's: a rule the purge dropped differs both times)."""
    for page in (full_page, purged_page):
        page.wait_for_function(SETTLED_JS)
    (names, full), (other_names, purged) = (p.evaluate(STYLES_JS, [declared, scope, None])
                                            for p in (full_page, purged_page))
    if len(full) != len(purged):
        return [f"{where}: {len(full)} elements with the full CSS, {len(purged)} with the purged CSS"]
    differ = [i for i, (a, b) in enumerate(zip(full, purged)) if a != b and names[i] == other_names[i]][:5]
    if differ and settle_ms:
        full_page.wait_for_timeout(settle_ms)
        return _same_styles(full_page, purged_page, declared, scope, where, 0)
    if not differ:
        return []
    before, after = (p.evaluate(STYLES_JS, [declared, scope, differ]) for p in (full_page, purged_page))
    return [f"{where}: {names[i]}: " + ", ".join(f"{k} {a[k]!r} -> {b.get(k)!r}" for k in a if a[k] != b.get(k))[:300]
            for i, a, b in zip(differ, before, after) if not _same_box_auto_margin(a, b)]


def _same_box_auto_margin(full: dict, purged: dict) -> bool:
    """Only margins differ and the element's box is the same in both tabs: an auto margin, whose value Chromium
    reads from a layout it may not have redone in a background tab (seen after the colour mode's switch: 190 px
    in one tab, 0 px in the other, the same box in both), not a rule the purge dropped."""
    differ = [k for k in full if full[k] != purged.get(k)]
    return bool(differ) and full["box"] == purged["box"] and all("margin" in k for k in differ)


@needs_site
@pytest.mark.parametrize("view", list(PURGE_VIEWS))
def test_the_purged_css_styles_every_state_a_reader_reaches_as_the_full_css(browser, server, view):
    """The landing page and chapter 2 (head viewer, quizzes, folded code, figures, maths) in two
    tabs, one with the stylesheets before the purge and one with the site's: after each step of
    READER_STEPS (a skip link focused, quizzes and folds opened, the head viewer changed, the page
    scrolled, a tooltip, the download menu, both drawers, the colour mode, the search), every element
    has the same computed style in both. Then the search's results page the same way."""
    from playwright.sync_api import Error as PlaywrightError

    assert FULL_CSS.is_dir(), f"{FULL_CSS} is missing: the build's CSS purge keeps the originals there"
    declared = _declared_properties()
    problems = []
    for rel in ["chapters/intro.html", "chapters/02_committee.html", f"search.html?q={SEARCH_TERM}"]:
        full, purged = _with_full_css(_Watch(browser, server, **PURGE_VIEWS[view])), _Watch(browser, server, **PURGE_VIEWS[view])
        try:
            pages = [w.open(rel) for w in (full, purged)]
            steps = READER_STEPS if not rel.startswith("search") else READER_STEPS[:1]
            if rel.startswith("search"):
                for page in pages:
                    page.locator("#search-results li").first.wait_for(timeout=10_000)
            for name, scope, step in steps:
                try:
                    done = [step(page) for page in pages]
                except PlaywrightError as exc:      # e.g. a drawer that no longer closes
                    problems.append(f"{rel}, {name}: failed: {str(exc).splitlines()[0]}")
                    break
                if done[0] != done[1]:
                    problems.append(f"{rel}, {name}: possible in one tab only")
                    break
                pages[1].wait_for_timeout(250)     # a tooltip that the step's focus or hover starts
                if done[0]:
                    problems += _same_styles(*pages, declared, scope, f"{rel}, {name}")
            problems += [f"{rel}: {p}" for p in full.problems + purged.problems]
        finally:
            full.close()
            purged.close()
    assert not problems, f"{view}:\n" + "\n".join(problems)


@needs_site
def test_the_purged_css_styles_every_page_as_the_full_css(browser, server):
    """Every page of the site, every fold open, at desktop width in both colour modes: the same
    computed style for every element with the full and with the purged stylesheets."""
    declared = _declared_properties()
    problems = []
    for scheme in ("light", "dark"):
        for page_file in _pages():
            rel = _rel(page_file)
            full, purged = (_with_full_css(_Watch(browser, server, **DESKTOP, color_scheme=scheme)),
                            _Watch(browser, server, **DESKTOP, color_scheme=scheme))
            try:
                pages = [w.open(rel) for w in (full, purged)]
                for page in pages:
                    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
                problems += _same_styles(*pages, declared, "page", f"{rel} ({scheme})")
            finally:
                full.close()
                purged.close()
    assert not problems, "\n".join(problems)


def test_the_purged_css_is_a_fraction_of_the_full_css():
    """The purge ran: each big stylesheet of the site is a fraction of its original (the theme's
    was 305 kB on every page)."""
    if not FULL_CSS.is_dir():
        pytest.skip(f"{FULL_CSS} does not exist: build the site first (`make book`)")
    full = {p.relative_to(FULL_CSS).as_posix(): p.stat().st_size for p in FULL_CSS.rglob("*.css")}
    site = {rel: (SITE / rel).stat().st_size for rel in full if (SITE / rel).is_file()}
    assert full["_static/styles/pydata-sphinx-theme.css"] > 250_000
    assert site["_static/styles/pydata-sphinx-theme.css"] < full["_static/styles/pydata-sphinx-theme.css"] / 2
    assert sum(site.values()) < sum(full.values()) / 2, (site, full)


@needs_site
def test_no_page_load_asks_for_a_file_the_site_lacks(browser):
    """Each page, and the site's root, as a first visit in a fresh browser: the server has every
    file the browser asks for, the icon it fetches by itself included (a page that names no icon
    makes it ask for /favicon.ico, which the site does not have: the root page did)."""
    answered: list[tuple[str, int]] = []
    icons = 0
    with serve_site(answered) as base:
        for rel in ["", *map(_rel, _pages())]:
            start = len(answered)
            context = browser.new_context(**DESKTOP)
            try:
                page = context.new_page()
                page.goto(base + rel, wait_until="load")
                page.wait_for_load_state("networkidle")
                for _ in range(100):          # the icon comes after the page: wait for it (10 s at most)
                    if any("favicon" in path for path, _ in answered[start:]):
                        icons += 1
                        break
                    page.wait_for_timeout(100)
            finally:
                context.close()
    missing = sorted({f"{path}: HTTP {code}" for path, code in answered if code >= 400})
    assert icons > len(_pages()) // 2, f"the browser fetched an icon on {icons} page loads: the test sees nothing"
    assert not missing, "requests the site could not answer:\n" + "\n".join(missing)


@needs_site
def test_maths_is_typeset_when_the_site_is_built():
    """No page loads MathJax or carries TeX: formulas are CHTML with a MathML copy for screen
    readers, and never a Tab stop."""
    pages = [p for p in _pages() if 'class="math notranslate' in p.read_text(encoding="utf-8")]
    assert SITE / "chapters" / "intro.html" in pages
    for page_file in pages:
        text = page_file.read_text(encoding="utf-8")
        assert "startup.js" not in text and "MathJax = " not in text, f"{_rel(page_file)} loads MathJax"
        formulas = re.findall(r'<(span|div) class="math notranslate nohighlight"[^>]*>(.*?)</\1>', text, re.S)
        assert formulas and all("<mjx-container" in body and "<math" in body for _, body in formulas), \
            f"{_rel(page_file)}: a formula left as TeX"
        assert 'tabindex' not in "".join(re.findall(r"<mjx-container[^>]*>", text))
    fonts = sorted(p.name for p in (SITE / "mathjax" / "fonts").glob("*.woff"))
    assert "MathJax_Main-Regular.woff" in fonts


@needs_site
def test_no_raw_template_is_served():
    assert not [p.name for p in (SITE / "_static").glob("*.html")], "Jinja templates served as pages"
    assert not list((SITE / "_static").glob("*_t"))


@needs_site
def test_every_figure_says_what_it_shows():
    """Every figure's alt text is a description, never its file's path: the text that
    mha_book.plotting.show computed (panels, axes, then the point), or the cell's own
    `mystnb: image: alt:`; a figure with neither fails the strict build (site/course_site.py)."""
    figures, computed = 0, 0
    for page_file in _notebook_pages():
        for tag in re.findall(r"<img [^>]*>", page_file.read_text(encoding="utf-8")):
            alt = html.unescape((re.search(r'alt="([^"]*)"', tag) or [None, ""])[1])
            assert alt and not re.search(r"\.(svg|png)\b", alt), f"{_rel(page_file)}: {tag[:200]}"
            if "_images/" in tag:
                figures += 1
                assert len(alt.split()) >= 8, f"{_rel(page_file)}: a terse alt text: {alt!r}"
                computed += bool(re.search(r"\b(heatmaps?|line charts?)\b.*\d", alt))
    assert figures >= 10 and computed >= 10, (figures, computed)


@needs_site
def test_no_build_plumbing_shown_under_the_first_figure():
    """The cell under chapter 1's first figure shows the computation, not its glue (a hidden cell
    glues the numbers), read on the built page; tests/test_plumbing.py checks every chapter's source."""
    text = (SITE / "chapters" / "01_unit_17_08.html").read_text(encoding="utf-8")
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in
             re.findall(r'<div class="cell_input.*?</pre>', text, re.S)]
    tv = [c for c in cells if "total-variation distance" in c]
    assert len(tv) == 1 and "gl(" not in tv[0] and "glue(" not in tv[0], tv


KEYS_TO_A_VIEWER = 6     # Tab, Enter presses from page load to a head viewer's first control
# Whether the focused link jumps into the page, to an element whose first control is the
# viewer's first select (so the next Tab lands there).
JUMPS_TO_JS = """v => { const a = document.activeElement;
  const t = a && a.hash && a.href.split('#')[0] === location.href.split('#')[0]
            && document.getElementById(decodeURIComponent(a.hash.slice(1)));
  return !!t && t.querySelector('a[href], button, input, select, textarea, summary, [tabindex]')
                === v.querySelector('select'); }"""


def _keys_to_viewer(page, viewer, limit: int = KEYS_TO_A_VIEWER) -> int:
    """Key presses, from page load, that put the focus on the viewer's first control: Tab to its
    skip link (site/skip_links.py), which must then be on screen, Enter, Tab. Fails past `limit`."""
    handle = viewer.element_handle()
    presses = 0
    while not page.evaluate(JUMPS_TO_JS, handle):
        assert presses < limit - 2, f"no skip link to {viewer} within {presses} Tab presses"
        page.keyboard.press("Tab")
        presses += 1
    page.wait_for_function("() => { const r = document.activeElement.getBoundingClientRect();"
                           " return r.top >= 0 && r.bottom <= innerHeight && r.height > 0; }")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    presses += 2
    assert page.evaluate("v => document.activeElement === v.querySelector('select')", handle), \
        f"after the skip link: {page.evaluate('document.activeElement.outerHTML.slice(0, 120)')}"
    return presses


@needs_site
@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_every_head_viewer_is_a_few_key_presses_from_page_load(browser, server, view):
    """WCAG 2.4.1: past the sidebar, the header and the copy buttons of every code cell, a skip
    link per viewer puts its first control a handful of key presses from the top of the page."""
    reached = []
    for page_file in (p for p in _pages() if 'class="head-selector"' in p.read_text(encoding="utf-8")):
        for n in range(page_file.read_text(encoding="utf-8").count('class="head-selector"')):
            watch = _Watch(browser, server, **(DESKTOP if view == "desktop" else PHONE))
            try:
                page = watch.open(_rel(page_file))
                presses = _keys_to_viewer(page, page.locator("div.head-selector").nth(n))
                reached.append(f"{_rel(page_file)} viewer {n + 1}: {presses}")
                assert not watch.problems, "\n".join(watch.problems)
            finally:
                watch.close()
    print(f"\n{view}: key presses from page load to each head viewer: " + "; ".join(reached))
    assert len(reached) >= 5, reached


KEYS_WITHOUT_SKIP_LINKS = 40     # Tab, Enter presses to a viewer for a reader who passes the skip links by


def _keys_past_the_skip_links(page, viewer) -> int:
    """Key presses from page load to the viewer's first control for a keyboard user who does not
    use the skip links: Tab on, past them, until the focus is on the viewer or on a link on the
    page that leads there (which must have been on screen when the page loaded, where this reader
    looks first), then Enter and Tab. Fails past KEYS_WITHOUT_SKIP_LINKS."""
    handle = viewer.element_handle()
    on_screen = page.evaluate_handle("""v => [...document.querySelectorAll('.bd-article a[href^="#"]')].filter(a => {
        const t = document.getElementById(decodeURIComponent(a.hash.slice(1))), r = a.getBoundingClientRect();
        return t && t.contains(v) && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; })""", handle)
    presses = 0
    while True:
        assert presses < KEYS_WITHOUT_SKIP_LINKS, f"{presses} Tab presses and the viewer is not in reach"
        page.keyboard.press("Tab")
        presses += 1
        if page.evaluate("v => v.contains(document.activeElement)", handle):
            return presses
        if page.evaluate("() => !document.activeElement.closest('.skip-link')") and page.evaluate(JUMPS_TO_JS, handle):
            break
    assert page.evaluate("a => a.includes(document.activeElement)", on_screen), \
        "the link to the viewer was not on the first screen when the page loaded"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("v => document.activeElement === v.querySelector('select')", handle)
    return presses + 2


@needs_site
@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_a_keyboard_user_who_skips_the_skip_links_reaches_every_viewer(browser, server, view):
    """The skip links show only once focused, and a reader who does not know them tabs past: from
    page load, through the sidebar and the header, to a link under the page's title (on screen
    from the start) or to the viewer itself, in at most KEYS_WITHOUT_SKIP_LINKS presses."""
    reached = []
    for page_file in (p for p in _pages() if 'class="head-selector"' in p.read_text(encoding="utf-8")):
        for n in range(page_file.read_text(encoding="utf-8").count('class="head-selector"')):
            watch = _Watch(browser, server, **(DESKTOP if view == "desktop" else PHONE))
            try:
                page = watch.open(_rel(page_file))
                reached.append(f"{_rel(page_file)} viewer {n + 1}: "
                               f"{_keys_past_the_skip_links(page, page.locator('div.head-selector').nth(n))}")
                assert not watch.problems, "\n".join(watch.problems)
            finally:
                watch.close()
    print(f"\n{view}: key presses to each head viewer without the skip links: " + "; ".join(reached))
    assert len(reached) >= 6, reached


@needs_site
def test_keyboard_reaches_the_head_viewer_in_a_few_presses_and_reads_its_values(watch):
    """Chapter 4's first head viewer from the keyboard: a few presses away from page load; its
    values open as a table, and a change of head is announced (aria-live)."""
    page = watch.open("chapters/04_complete_guide.html")
    viewer = page.locator("div.head-selector").first
    assert _keys_to_viewer(page, viewer) <= KEYS_TO_A_VIEWER
    assert viewer.get_attribute("role") == "group" and "Untrained" in viewer.get_attribute("aria-label")
    status = viewer.locator(".head-selector-status")
    assert status.get_attribute("aria-live") == "polite" and status.inner_text() == ""
    page.keyboard.press("ArrowDown")        # the next head, from the keyboard
    status.filter(has_text="Showing head 2").wait_for()
    assert "Strongest weight" in status.inner_text()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.tagName") == "SUMMARY"
    page.keyboard.press("Enter")
    table = viewer.locator(".head-selector-table table")
    table.wait_for(state="visible")
    n_q = viewer.locator("text.head-selector-label[text-anchor='end']").count()
    cells = table.locator("tbody td").all_inner_texts()
    assert len(cells) == n_q * table.locator("thead th[scope='col']").count() and n_q > 0
    shown = viewer.locator("rect.head-selector-cell").evaluate_all("rs => rs.map(r => r.dataset.value)")
    assert cells == shown, "the table does not hold the map's values"
    assert table.locator("tbody th[scope='row']").count() == n_q
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_skip_links_lead_to_the_main_content_and_to_each_sections_answers(watch):
    """The theme's "Skip to main content" moves the Tab order past the sidebar; a page's answers
    (dropdowns) are one skip link away, and the next Tab opens nothing but lands on the first."""
    page = watch.open("chapters/04_complete_guide.html")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Skip to main content"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('#main-content') !== null "
                         "&& document.activeElement.closest('.bd-sidebar-primary') === null")
    links = page.locator("nav.course-skip-links a")
    labels = links.all_inner_texts()
    assert labels[0].startswith("Head viewer: ") and re.fullmatch(r"Check yourself: \d+ answers", labels[1]), labels
    for n in range(1, links.count()):
        page = watch.open("chapters/04_complete_guide.html")
        for _ in range(n + 2):
            page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == labels[n]
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.matches('details.sd-dropdown:not([open]) > summary')")
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_slash_opens_the_search(watch):
    page = watch.open("chapters/intro.html")
    page.keyboard.press("/")
    field = page.locator("#pst-search-dialog input[type='search'], .search-button__search-container input").first
    field.wait_for(state="visible", timeout=5_000)
    assert page.evaluate("() => document.activeElement.type") == "search"

@needs_site
def test_head_selector_redraws_when_another_head_is_chosen(watch):
    pages = [p for p in _pages() if 'class="head-selector"' in p.read_text(encoding="utf-8")]
    assert SITE / "chapters" / "intro.html" in pages
    for page_file in pages:
        rel = _rel(page_file)
        page = watch.open(rel)
        widgets = page.locator("div.head-selector")
        for n in range(widgets.count()):
            widget = widgets.nth(n)
            assert widget.get_attribute("data-hs-ready") == "true", f"{rel}: widget {n} not set up"
            assert widget.locator(".head-selector-static").count() == 0
            cells = widget.locator("rect.head-selector-cell")
            before = cells.evaluate_all("rs => rs.map(r => r.getAttribute('fill') + r.dataset.value)")
            assert before, f"{rel}: widget {n} drew no cells"
            select = widget.locator("select.head-selector-head")
            options = select.locator("option").count()
            assert options >= 2 or rel != "chapters/intro.html"
            changed = False
            for choice in range(1, options):
                select.select_option(str(choice))
                assert widget.get_attribute("data-head") == str(choice)
                assert widget.locator("svg.head-selector-heatmap").get_attribute(
                    "data-head") == str(choice)
                after = cells.evaluate_all(
                    "rs => rs.map(r => r.getAttribute('fill') + r.dataset.value)")
                if after != before:
                    changed = True
                    break
            if rel == "chapters/intro.html":
                assert changed, "choosing another head did not change the intro's heatmap"
        assert not watch.problems, f"{rel}:\n" + "\n".join(watch.problems)


@needs_site
def test_quiz_dropdown_reveals_its_answer_without_a_kernel(watch):
    page = watch.open("chapters/intro.html")
    quiz = page.locator("details.sd-dropdown").first
    answer = quiz.locator(".sd-summary-content")
    assert not answer.is_visible()
    quiz.locator("summary").click()
    answer.wait_for(state="visible")
    assert "softmax" in answer.inner_text()
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_search_finds_a_term(watch):
    page = watch.open(f"search.html?q={SEARCH_TERM}")
    hits = page.locator("#search-results ul.search li a")
    hits.first.wait_for()
    targets = hits.evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert any("chapters/intro.html" in t for t in targets), targets
    assert not watch.problems, "\n".join(watch.problems)


# ---------------------------------------------------------------------------------------------
# Phones, dark mode, downloads, search, page weight
# ---------------------------------------------------------------------------------------------
WIDE = (".pst-scrollable-table-container, .bd-article pre, .bd-article div.math, "
        ".bd-article mjx-container[display='true'], .head-selector-scroll")
# WCAG contrast ratio of a text colour on the first opaque background behind it.
CONTRAST_JS = """els => els.map(el => {
  const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = c => { const v = rgb(c).slice(0, 3).map(x => { x /= 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  let bg = 'rgb(255, 255, 255)';
  for (let e = el.parentElement; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor, a = rgb(c);
    if (a.length === 3 || (a.length === 4 && a[3] > 0.99)) { bg = c; break; }
  }
  const fg = getComputedStyle(el).fill;
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  return [el.textContent, fg, bg, (hi + 0.05) / (lo + 0.05)];
})"""


def _notebook_pages() -> list[Path]:
    return [SITE / "chapters" / f"{md.stem}.html" for md in sorted((ROOT / "chapters").glob("*.md"))
            if "kernelspec:" in md.read_text()]


@needs_site
def test_both_drawers_open_on_a_phone(phone):
    """Below 992 px the chapter list and the page contents live in drawers behind two buttons."""
    page = phone.open("chapters/02_committee.html")
    drawers = {".primary-toggle": ("#pst-primary-sidebar-modal", "Multi-head attention"),
               ".secondary-toggle": ("#pst-secondary-sidebar-modal", "PyTorch")}
    for toggle, (drawer, text) in drawers.items():
        box = page.locator(drawer)
        assert not box.is_visible(), f"{drawer} is open before {toggle} is tapped"
        buttons = [b for b in page.locator(toggle).all() if b.is_visible()]
        assert len(buttons) == 1, f"{toggle}: {len(buttons)} visible buttons"
        buttons[0].tap()
        box.wait_for(state="visible", timeout=5_000)
        width = box.bounding_box()["width"]
        assert 200 < width <= 390, f"{drawer}: {width} px wide"
        assert text in box.inner_text(), f"{drawer} does not show its links"
        page.keyboard.press("Escape")
        box.wait_for(state="hidden", timeout=5_000)
    assert not phone.problems, "\n".join(phone.problems)


@needs_site
@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_head_selector_labels_are_readable_in_both_themes(browser, server, scheme):
    watch = _Watch(browser, server, color_scheme=scheme, **PHONE)
    try:
        for page_file in (p for p in _pages() if 'class="head-selector"' in p.read_text(encoding="utf-8")):
            page = watch.open(_rel(page_file))
            assert page.evaluate("document.documentElement.dataset.theme") == scheme
            labels = page.locator("div.head-selector text.head-selector-label")
            assert labels.count() > 0, f"{_rel(page_file)}: no labels"
            poor = [r for r in labels.evaluate_all(CONTRAST_JS) if r[3] < 4.5]
            assert not poor, f"{_rel(page_file)} ({scheme}): labels below contrast 4.5: {poor[:3]}"
            ends = page.locator(".head-selector-legend > span:not(.head-selector-colorbar)").all_inner_texts()
            assert ends and all(re.fullmatch(r"-?\d+(\.\d{1,3})?", e) for e in ends), ends
        assert not watch.problems, "\n".join(watch.problems)
    finally:
        watch.close()


def _viewer_states(page):
    """(viewer number, group number, viewer) for every viewer of a page and every group it can
    show, the group selected (a group has labels and a colour scale of its own)."""
    viewers = page.locator("div.head-selector")
    for n in range(viewers.count()):
        viewer = viewers.nth(n)
        groups = viewer.locator("select.head-selector-group")
        for g in range(max(1, groups.locator("option").count())):
            if groups.count():
                groups.select_option(str(g))
            yield n, g, viewer


@needs_site
def test_every_head_viewers_colour_scale_is_named_for_a_screen_reader(watch):
    """The colour scale is one picture to a screen reader, named by what its colours show and what
    its two ends mean ("0" and "1" alone said nothing), for every viewer and every group."""
    import yaml

    seen = 0
    for page_file in (p for p in _pages() if 'class="head-selector"' in p.read_text(encoding="utf-8")):
        page = watch.open(_rel(page_file))
        for n, g, viewer in _viewer_states(page):
            legend = viewer.locator(".head-selector-legend")
            lo, hi = legend.locator(":scope > span:not(.head-selector-colorbar)").all_inner_texts()
            heard = yaml.safe_load(legend.aria_snapshot())      # Playwright's accessibility tree, as YAML
            expected = [f'img "Colour scale: attention weight from {lo} (dark purple) to {hi} (yellow)"']
            assert heard == expected, f"{_rel(page_file)} viewer {n + 1}, group {g + 1}: {heard!r}"
            assert "attention weight" in legend.inner_text()      # named on screen too
            seen += 1
    assert seen >= 14, seen
    assert not watch.problems, "\n".join(watch.problems)


# Every label of a head viewer's map on screen: its box (the text's box through its transform and
# the map's scale), the size it is drawn at, and the pairs of labels whose boxes overlap by more
# than half a pixel (separating axes: the labels may be turned).
LABEL_BOXES_JS = """svg => {
  // Each label's box on screen (its text box mapped through its transform and the map's scale):
  // four corners; the size its font is drawn at; then every pair of labels that overlap.
  const quads = [...svg.querySelectorAll('text.head-selector-label')].map(t => {
    const b = t.getBBox(), m = t.getScreenCTM();
    const corner = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
    return {text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b),
            pts: [corner(b.x, b.y), corner(b.x + b.width, b.y), corner(b.x + b.width, b.y + b.height),
                  corner(b.x, b.y + b.height)]};
  });
  // Separating axes (convex quadrilaterals): overlap = the smallest depth over the edge normals.
  const depth = (p, q) => Math.min(...[p, q].flatMap(s => s.pts.map((a, i) => {
    const b = s.pts[(i + 1) % 4], n = [a[1] - b[1], b[0] - a[0]], l = Math.hypot(...n) || 1;
    const proj = z => z.pts.map(c => (c[0] * n[0] + c[1] * n[1]) / l);
    return Math.min(Math.max(...proj(p)), Math.max(...proj(q))) - Math.max(Math.min(...proj(p)), Math.min(...proj(q)));
  })));
  const overlaps = [];
  quads.forEach((p, i) => quads.slice(i + 1).forEach(q => {
    const d = depth(p, q); if (d > 0.5) { overlaps.push([p.text, q.text, Math.round(d * 10) / 10]); } }));
  const cell = svg.querySelector('rect.head-selector-cell');
  return {labels: quads.length, smallest: Math.min(...quads.map(q => q.px)), overlaps: overlaps.length,
          sample: overlaps.slice(0, 3), cell: cell ? cell.getBoundingClientRect().width : 0,
          box: svg.parentElement.clientWidth, svg: svg.getBoundingClientRect().width};
}"""


@needs_site
@pytest.mark.parametrize("width", [320, 390])
def test_every_head_viewers_labels_are_readable_and_apart_on_a_phone(browser, server, width):
    """On a 320 and a 390 px phone every viewer, in every group, draws its labels at 10 px or more
    with no two overlapping; every token is labelled (a map too wide then scrolls in its box), and
    an axis of positions is labelled every k-th position, from the first."""
    from mha_book.plotting import MIN_LABEL_PX

    bad, seen = [], 0
    watch = _Watch(browser, server, color_scheme="dark", **{**PHONE, "viewport": {"width": width, "height": 844}})
    try:
        for page_file in (p for p in _pages() if 'class="head-selector"' in p.read_text(encoding="utf-8")):
            page = watch.open(_rel(page_file))
            for n, g, viewer in _viewer_states(page):
                where = f"{_rel(page_file)} viewer {n + 1}, group {g + 1}"
                spec = json.loads(viewer.locator("script.head-selector-data").text_content())
                found = viewer.locator("svg.head-selector-heatmap").evaluate(LABEL_BOXES_JS)
                if found["smallest"] < MIN_LABEL_PX:
                    bad.append(f"{where}: labels of {found['smallest']:.1f} px")
                if found["overlaps"]:
                    bad.append(f"{where}: {found['overlaps']} overlapping pairs, e.g. {found['sample']}")
                for axis, anchor in (("query", "end"), ("key", "start")):
                    labels = viewer.locator(f"text.head-selector-label[text-anchor='{anchor}']").all_text_contents()
                    tokens = spec[axis][g] if isinstance(spec[axis][0], list) else spec[axis]
                    if spec.get("positions", {}).get(axis):
                        step = int(labels[1]) - int(labels[0]) if len(labels) > 1 else len(tokens)
                        shown = [str(i + 1) for i in range(0, len(tokens), step)]
                    else:
                        shown = tokens
                    if labels != shown:
                        bad.append(f"{where}: {axis} labels {labels}, expected {shown}")
                seen += 1
        assert not watch.problems, "\n".join(watch.problems)
    finally:
        watch.close()
    assert seen >= 14, seen
    assert not bad, f"at {width} px:\n" + "\n".join(bad)


@needs_site
def test_toy_model_selector_labels_rows_with_the_letters(phone):
    page = phone.open("chapters/02_committee.html")
    widget = page.locator("div.head-selector").first
    rows = widget.locator("text.head-selector-label[text-anchor='end']").evaluate_all(
        "ts => ts.map(t => t.textContent)")
    group = widget.locator("select.head-selector-group option").first.inner_text()
    assert rows and all(re.fullmatch(r"[a-z]", r) for r in rows), rows
    assert "".join(rows) in group, (rows, group)    # "trained: cahbddgf" labels rows c, a, h, ...


@needs_site
def test_wide_content_scrolls_in_its_own_box_on_a_phone(phone):
    seen = 0
    for page_file in _notebook_pages():
        page = phone.open(_rel(page_file))
        report = page.evaluate("""sel => {
            const vw = document.documentElement.clientWidth;
            const wide = [...document.querySelectorAll(sel)].filter(b => b.scrollWidth > b.clientWidth + 1);
            return [document.documentElement.scrollWidth, vw, wide.map(b => [b.tagName,
                getComputedStyle(b).overflowX, b.classList.contains('scroll-cue-right'),
                Math.round(b.getBoundingClientRect().right)])];
        }""", WIDE)
        page_width, viewport, boxes = report
        assert page_width <= viewport, f"{_rel(page_file)}: the page scrolls sideways ({page_width} > {viewport})"
        for tag, overflow, cue, right in boxes:
            assert overflow in ("auto", "scroll") and right <= viewport, (_rel(page_file), tag, overflow, right)
            assert cue, f"{_rel(page_file)}: a wide {tag} has no scroll cue"
        seen += len(boxes)
    assert seen > 0, "no wide box on any page: the test checks nothing"
    # Scrolled to its end, a box's cue moves to the left edge.
    box = page.locator(".bd-article pre").first
    box.evaluate("b => { b.scrollLeft = b.scrollWidth; b.dispatchEvent(new Event('scroll')); }")
    assert box.evaluate("b => [b.classList.contains('scroll-cue-left'), b.classList.contains('scroll-cue-right')]") \
        in ([True, False], [False, False])
    assert not phone.problems, "\n".join(phone.problems)


@needs_site
def test_phone_shows_every_column_of_a_head_map_and_no_fullscreen_button(phone):
    page = phone.open("chapters/05_bilstm_8_heads.html")
    assert "fullscreen" not in page.locator("header").inner_html().lower()
    maps = page.locator("svg.head-selector-heatmap")
    assert maps.count() > 0
    for n in range(maps.count()):
        right = maps.nth(n).bounding_box()["x"] + maps.nth(n).bounding_box()["width"]
        box = maps.nth(n).locator("xpath=..")
        assert right <= 390 and "scroll-cue-right" not in (box.get_attribute("class") or ""), right
    # Its values table is wider than a phone: a box that scrolls sideways from the keyboard.
    viewer = page.locator("div.head-selector").first
    viewer.locator(".head-selector-values > summary").tap()
    table_box = viewer.locator(".head-selector-table")
    page.wait_for_function("b => b.getAttribute('tabindex') === '0'", arg=table_box.element_handle())
    assert table_box.evaluate("b => b.scrollWidth > b.clientWidth")
    table_box.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("b => b.scrollLeft > 0", arg=table_box.element_handle())
    assert not phone.problems, "\n".join(phone.problems)


@needs_site
def test_unset_addresses_show_no_button_and_no_placeholder():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = (config.get("repository") or {}).get("url") or ""
    launch = config.get("launch_buttons") or {}
    text = (SITE / "chapters" / "intro.html").read_text(encoding="utf-8")
    for placeholder in ("example.org", "mha-course/mha-course", "<this repository>"):
        assert placeholder not in text, placeholder
    assert ("repository-button" in text) == bool(repo)
    assert ("binder" in text.lower()) == bool(repo and launch.get("binderhub_url"))
    assert ("jupyterhub" in text.lower()) == bool(repo and launch.get("jupyterhub_url"))


@needs_site
def test_search_for_notation_finds_the_pages_that_use_it(watch):
    # W^O / W_o as the typeset maths carries them (MathML), or w_o in code
    notation = re.compile(r"<msup><mi>W</mi><mi>O</mi></msup>|<msub><mi>W</mi><mi>o</mi></msub>|\bw_o\b")
    indexed = {_rel(p) for p in _pages() if p.name not in ("search.html", "genindex.html", "index.html")}
    expected = {rel for rel in indexed if notation.search((SITE / rel).read_text(encoding="utf-8"))}
    assert expected and expected != indexed, "the test needs pages with and pages without W^O"
    page = watch.open("search.html?q=W%5EO")
    page.locator("#search-results .search-summary").filter(has_text="found").wait_for()
    hrefs = page.locator("#search-results ul.search li > a").evaluate_all(
        "as => as.map(a => a.getAttribute('href').split(/[?#]/)[0])")
    assert set(hrefs) == expected
    snippets = page.locator("#search-results ul.search li p.context").all_inner_texts()
    assert snippets and any("W^O" in s for s in snippets), snippets
    assert not [s for s in snippets if "\\(" in s or "\\[" in s or "\\frac" in s], snippets
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_downloaded_chapter_notebooks_show_their_numbers(server):
    """The .ipynb behind each notebook page's download button: a plain notebook, outputs and numbers in."""
    import nbformat
    from urllib.request import urlopen

    myst = re.compile(r"\{[\w:.-]+\}`|^\s*(?::{3,}|`{3,})\{|^\([\w.:-]+\)=\s*$", re.M)
    for page_file in _notebook_pages():
        rel = _rel(page_file)
        link = next(u for t, _, u in _scan(page_file).urls if t == "a" and u.endswith(".ipynb"))
        url = server + (Path(rel).parent / link).as_posix()
        text = urlopen(url).read().decode("utf-8")
        cells = json.loads(text)["cells"]   # as written: nbformat's reader would add missing ids itself
        assert all("id" in c for c in cells), f"{rel}: cells without an id: {[c['source'][:40] for c in cells if 'id' not in c]}"
        assert len({c["id"] for c in cells}) == len(cells), f"{rel}: two cells share an id"
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert not myst.search(markdown), f"{rel}: MyST left in the notebook: {myst.search(markdown)[0]!r}"
        assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{rel}: no outputs"
        glued = re.findall(r'<span class="pasted-text">([^<]*)</span>', page_file.read_text(encoding="utf-8"))
        plain = markdown.replace("'", "\u2019")    # the site prints apostrophes typographically
        missing = [v for v in glued if v not in markdown and html.unescape(v) not in plain]
        assert not missing, f"{rel}: values shown on the page but not in the notebook: {missing[:5]}"
        if "sd-dropdown" in page_file.read_text(encoding="utf-8"):
            assert "<details>" in markdown, f"{rel}: answers are not folded"


@needs_site
def test_downloaded_intro_notebook_runs(server, tmp_path):
    import nbclient
    import nbformat
    from urllib.request import urlopen

    nb = nbformat.reads(urlopen(server + "_sources/chapters/intro.ipynb").read().decode(), as_version=4)
    for cell in nb.cells:
        cell.outputs = [] if cell.cell_type == "code" else None
        if cell.outputs is None:
            del cell["outputs"]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("head-selector" in o.get("data", {}).get("text/html", "") for o in outputs)


# ---------------------------------------------------------------------------------------------
# Focus, reflow, figures, copying, forced colours, search from disk (as readers met them)
# ---------------------------------------------------------------------------------------------
# Resolves once the focused element has stopped moving (the theme scrolls smoothly) and no
# animation runs (the skip links slide in): what a reader sees after pressing Tab.
SETTLE_JS = """() => new Promise(done => { let last = null, same = 0;
  (function frame() {
    const a = document.activeElement, r = a ? a.getBoundingClientRect() : {top: 0, left: 0};
    const key = [r.top, r.left, scrollX, scrollY].join();
    const still = document.getAnimations().every(x => x.playState !== 'running');
    if (key === last && still) { if (++same > 2) return done(true); } else { same = 0; last = key; }
    requestAnimationFrame(frame);
  })(); })"""
# The focused element: new (not met before on this walk), where it is, and the area its focus
# indicator can be in (its boxes, 5 px around, within the viewport).
TAB_STOP_JS = """() => {
  const a = document.activeElement;
  if (!a || a === document.body) return null;
  window.__tabSeen = window.__tabSeen || new WeakSet();
  if (window.__tabSeen.has(a)) return {again: true};
  window.__tabSeen.add(a);
  const vw = document.documentElement.clientWidth, vh = innerHeight;
  const rects = [...a.getClientRects()].filter(r => r.width > 0 && r.height > 0);
  const name = (a.getAttribute('aria-label') || a.textContent || a.tagName).trim().replace(/\\s+/g, ' ').slice(0, 60);
  const box = rects.reduce((b, r) => [Math.min(b[0], r.left), Math.min(b[1], r.top), Math.max(b[2], r.right),
                                      Math.max(b[3], r.bottom)], [1e9, 1e9, -1e9, -1e9]);
  const x0 = Math.max(0, box[0] - 5), y0 = Math.max(0, box[1] - 5);
  const x1 = Math.min(vw, box[2] + 5), y1 = Math.min(vh, box[3] + 5);
  const style = getComputedStyle(a);
  return {again: false, name: a.tagName.toLowerCase() + ' "' + name + '"',
          onscreen: rects.length > 0 && box[2] > 0 && box[3] > 0 && box[0] < vw && box[1] < vh
                    && style.visibility !== 'hidden' && style.opacity !== '0',
          clip: {x: x0, y: y0, width: x1 - x0, height: y1 - y0},
          perimeter: rects.reduce((p, r) => p + 2 * (r.width + r.height), 0)}; }"""


def _tab_stops(page, limit: int = 800):
    """Press Tab from the top of the page until the focus comes back round; yields each stop."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        page.evaluate(SETTLE_JS)
        stop = page.evaluate(TAB_STOP_JS)
        if stop is None or stop["again"]:
            return
        yield stop
    raise AssertionError(f"more than {limit} Tab stops: the walk never came back round")


def _changed_pixels(before: bytes, after: bytes) -> int:
    """How many pixels differ visibly (by more than 40 of 255 in some channel) between two PNGs."""
    import io

    from PIL import Image, ImageChops

    a, b = (Image.open(io.BytesIO(png)).convert("RGB") for png in (before, after))
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 40 else 0)
    return diff.histogram()[255]


@needs_site
def test_every_tab_stop_shows_where_the_focus_is(browser, server):
    """WCAG 2.4.7 by pixels: on every page, at each Tab stop, the area around the focused element
    looks different with the focus and without it, by at least a 1 px ring's worth of pixels
    (a ring cut off by an `overflow: auto` box, or no ring at all, fails)."""
    invisible, stops = [], 0
    for page_file in _pages():
        watch = _Watch(browser, server, **DESKTOP, reduced_motion="reduce")
        try:
            page = watch.open(_rel(page_file))
            for stop in _tab_stops(page):
                stops += 1
                if not stop["onscreen"]:
                    invisible.append(f"{_rel(page_file)}: {stop['name']} is off screen")
                    continue
                focused = page.screenshot(clip=stop["clip"])
                page.evaluate("() => { window.__tabFocus = document.activeElement; document.activeElement.blur(); }")
                page.evaluate(SETTLE_JS)
                plain = page.screenshot(clip=stop["clip"])
                page.evaluate("() => window.__tabFocus.focus({preventScroll: true})")   # the next Tab goes on from it
                changed = _changed_pixels(focused, plain)
                if changed < stop["perimeter"]:
                    invisible.append(f"{_rel(page_file)}: {stop['name']}: {changed} pixels change with the "
                                     f"focus, fewer than its perimeter ({stop['perimeter']:.0f})")
            assert not watch.problems, "\n".join(watch.problems)
        finally:
            watch.close()
    assert stops > 300, f"only {stops} Tab stops on {len(_pages())} pages: the walk stopped early"
    assert not invisible, f"{len(invisible)} of {stops} Tab stops show no focus:\n" + "\n".join(invisible)


@needs_site
def test_no_tab_stop_is_off_screen_on_a_phone(browser, server):
    """At 390 px the sidebars are closed drawers: Tab must not walk through their hidden links.
    Every Tab stop, once the browser has scrolled to it, is on screen and visible."""
    hidden, stops = [], 0
    for page_file in _pages():
        watch = _Watch(browser, server, **PHONE, reduced_motion="reduce")
        try:
            page = watch.open(_rel(page_file))
            for stop in _tab_stops(page):
                stops += 1
                if not stop["onscreen"]:
                    hidden.append(f"{_rel(page_file)}: {stop['name']}")
        finally:
            watch.close()
    assert stops > 300, stops
    assert not hidden, f"{len(hidden)} of {stops} Tab stops off screen at 390 px:\n" + "\n".join(hidden)


@needs_site
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_colour_mode_button_shows_its_mode(browser, server, scheme):
    """The header's colour-mode button shows one icon, the current mode's, drawn in pixels."""
    watch = _Watch(browser, server, **DESKTOP, color_scheme=scheme)
    try:
        page = watch.open("chapters/intro.html")
        button = page.locator(".theme-switch-button").first
        shown = button.evaluate("""b => [...b.children].filter(i => getComputedStyle(i).display !== 'none'
                                    && i.getBoundingClientRect().width > 4).map(i => i.getAttribute('data-mode'))""")
        mode = page.evaluate("document.documentElement.dataset.mode")
        assert shown == [mode], f"mode {mode!r}: icons shown {shown}"
        page.mouse.move(0, 0)
        drawn = button.screenshot()
        button.evaluate("b => { for (const i of b.children) i.style.visibility = 'hidden'; }")
        assert _changed_pixels(drawn, button.screenshot()) > 30, "the button's icon draws nothing"
        button.click()                                      # the next mode, and its icon
        assert page.evaluate("document.documentElement.dataset.mode") != mode
        assert not watch.problems, "\n".join(watch.problems)
    finally:
        watch.close()


@needs_site
def test_every_page_reflows_at_320_px(browser, server):
    """WCAG 1.4.10: at 320 CSS px (1280 px at 400 % zoom) no page scrolls sideways; only boxes
    of code, tables and wide formulas scroll inside themselves."""
    wide = []
    watch = _Watch(browser, server, viewport={"width": 320, "height": 640})
    try:
        for page_file in _pages():
            page = watch.open(_rel(page_file))
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 320:
                wide.append(f"{_rel(page_file)}: {width} px wide")
        assert not watch.problems, "\n".join(watch.problems)
    finally:
        watch.close()
    assert not wide, "pages that scroll sideways at 320 px:\n" + "\n".join(wide)


@needs_site
def test_the_header_scrolls_away_in_a_short_viewport(browser, server):
    """At 400 % zoom (320 x 225 CSS px) a sticky header would hide a quarter of the screen: once
    the reader scrolls, the header has left the screen."""
    watch = _Watch(browser, server, viewport={"width": 320, "height": 225}, reduced_motion="reduce")
    try:
        page = watch.open("chapters/02_committee.html")
        page.evaluate("window.scrollTo(0, 1500)")
        page.evaluate(SETTLE_JS)
        covered = page.evaluate("""() => [...document.querySelectorAll('body *')].filter(e => {
            const s = getComputedStyle(e), r = e.getBoundingClientRect();
            return ['sticky', 'fixed'].includes(s.position) && s.visibility !== 'hidden' && r.height > 0
                   && r.bottom > 0 && r.top < innerHeight; }).map(e => [e.className, Math.round(e.getBoundingClientRect().height)])""")
        assert not [c for c in covered if c[1] > 0.1 * 225], f"fixed or sticky on screen after a scroll: {covered}"
    finally:
        watch.close()


@needs_site
def test_figures_are_numbered_captioned_and_readable_on_a_phone(browser, server):
    """Every figure a chapter cell draws is a numbered figure with a caption that the text can
    cite, and on a 390 px phone none of its labels is smaller than mha_book.plotting.MIN_LABEL_PX
    (matplotlib's SVGs: a label's size times the scale it is shown at; the head viewers' maps
    likewise)."""
    from mha_book.plotting import MIN_LABEL_PX, label_sizes

    small, uncaptioned, figures, maps = [], [], 0, 0
    watch = _Watch(browser, server, **PHONE)
    try:
        for page_file in _notebook_pages():
            page = watch.open(_rel(page_file))
            for src, width, caption in page.evaluate("""() => [...document.querySelectorAll('.cell_output img')].map(i => {
                    const f = i.closest('figure'), c = f && f.querySelector('figcaption');
                    return [i.getAttribute('src'), i.getBoundingClientRect().width, c ? c.innerText : null]; })"""):
                figures += 1
                if not caption or not re.match(r"Fig\. \d+\s+\S", caption):
                    uncaptioned.append(f"{_rel(page_file)}: {src} ({caption!r})")
                if src.endswith(".svg"):
                    width_pt, sizes = label_sizes((page_file.parent / src).read_text(encoding="utf-8"))
                    smallest = min(sizes) * width / width_pt
                    if smallest < MIN_LABEL_PX:
                        small.append(f"{_rel(page_file)}: {src}: labels down to {smallest:.1f} px")
            for smallest in page.locator("svg.head-selector-heatmap").evaluate_all("""ss => ss.map(s =>
                    Math.min(...[...s.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize)))
                    * s.getBoundingClientRect().width / s.viewBox.baseVal.width)"""):
                maps += 1
                if smallest < MIN_LABEL_PX:
                    small.append(f"{_rel(page_file)}: a head viewer's labels down to {smallest:.1f} px")
        assert not watch.problems, "\n".join(watch.problems)
    finally:
        watch.close()
    assert figures >= 10 and maps >= 5, (figures, maps)
    assert not uncaptioned, "figures without a number and caption:\n" + "\n".join(uncaptioned)
    assert not small, f"labels under {MIN_LABEL_PX} px on a 390 px phone:\n" + "\n".join(small)


@needs_site
def test_copied_prose_keeps_its_formulas_as_tex(browser, server):
    """Select a paragraph with formulas, copy (Ctrl+C): the clipboard holds its words and each
    formula as TeX between dollars, on every page that has one."""
    checked = 0
    watch = _Watch(browser, server, **DESKTOP, permissions=["clipboard-read", "clipboard-write"])
    try:
        for page_file in (p for p in _pages() if 'data-tex="' in p.read_text(encoding="utf-8")):
            page = watch.open(_rel(page_file))
            paragraph = page.locator(".bd-article p:has(span.math[data-tex])").first
            words, formulas = paragraph.evaluate("""p => { const c = p.cloneNode(true);
                const tex = [...c.querySelectorAll('[data-tex]')].map(m => m.dataset.tex);
                c.querySelectorAll('[data-tex]').forEach(m => m.remove());
                return [c.textContent.split(/\\s+/).filter(w => /^[A-Za-z]{4,}$/.test(w)), tex]; }""")
            paragraph.evaluate("""p => { const r = document.createRange(); r.selectNodeContents(p);
                const s = getSelection(); s.removeAllRanges(); s.addRange(r); }""")
            page.keyboard.press("Control+C")
            copied = page.evaluate("navigator.clipboard.readText()")
            missing = [t for t in formulas if f"${t}$" not in copied]
            assert formulas and not missing, f"{_rel(page_file)}: formulas not copied as TeX: {missing} in {copied!r}"
            assert all(w in copied for w in words), f"{_rel(page_file)}: words lost: {copied!r}"
            checked += 1
        assert not watch.problems, "\n".join(watch.problems)
    finally:
        watch.close()
    assert checked >= 6, checked


@needs_site
def test_the_head_viewers_colour_scale_shows_in_forced_colours(browser, server):
    """A contrast theme (forced colours) drops CSS backgrounds: the viewer's colour scale, a
    gradient, must keep its colours, as the map does."""
    watch = _Watch(browser, server, **DESKTOP, forced_colors="active", color_scheme="dark")
    try:
        page = watch.open("chapters/04_complete_guide.html")
        bar = page.locator(".head-selector-colorbar").first
        bar.scroll_into_view_if_needed()
        import io

        from PIL import Image

        colours = Image.open(io.BytesIO(bar.screenshot())).convert("RGB").getcolors(1 << 16) or []
        assert len(colours) >= 20, f"the colour scale shows {len(colours)} colours in forced-colours mode"
    finally:
        watch.close()


@needs_site
def test_search_opened_from_disk_shows_snippets_without_errors(browser):
    """The README's first suggestion is to open the built site from disk: there the search must
    show each hit's snippet too, with no console error (the browser refuses fetch on file://)."""
    context = browser.new_context(**DESKTOP)
    errors = []
    try:
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((SITE / "search.html").as_uri() + f"?q={SEARCH_TERM}")
        page.locator("#search-results .search-summary").filter(has_text="found").wait_for()
        hits = page.locator("#search-results ul.search > li")
        page.wait_for_function("n => document.querySelectorAll('#search-results ul.search li p.context').length >= n",
                               arg=hits.count(), timeout=15_000)
        snippets = page.locator("#search-results ul.search li p.context").all_inner_texts()
        assert hits.count() >= 3 and all(SEARCH_TERM in s.lower() for s in snippets), snippets
        assert not errors, errors
    finally:
        context.close()


@needs_site
def test_each_answer_is_named_after_its_question(watch):
    """A page's quiz toggles have different names ("Answer to Quiz 2"), so a screen reader's list
    of them, or a voice command, can tell them apart."""
    seen = 0
    for page_file in _notebook_pages():
        page = watch.open(_rel(page_file))
        names = [n.strip() for n in page.locator("details.sd-dropdown > summary").all_inner_texts()]
        assert len(names) == len(set(names)), f"{_rel(page_file)}: toggles share names: {names}"
        seen += len(names)
    page = watch.open("chapters/02_committee.html")
    names = page.locator("details.sd-dropdown > summary").all_inner_texts()
    assert [n.strip() for n in names[:2]] == ["Answer to Quiz 1", "Answer to Quiz 2"], names
    assert seen >= 30, seen


@needs_site
def test_the_head_viewer_names_a_repeated_letter_by_its_position(phone):
    """The toy task's sequences repeat letters: the viewer's status and value table name a row or
    column by its position too when its label is not unique."""
    page = phone.open("chapters/02_committee.html")
    viewer = page.locator("div.head-selector").first
    viewer.locator("select.head-selector-head").select_option("1")
    status = viewer.locator(".head-selector-status").inner_text()
    rows = viewer.locator("text.head-selector-label[text-anchor='end']").all_text_contents()
    letter = re.search(r"from query \u201c(.)\u201d( \(\d+\))?", status)
    assert letter, status
    repeated = rows.count(letter.group(1)) > 1
    assert bool(letter.group(2)) == repeated, f"{status!r} for rows {rows}"
    viewer.locator(".head-selector-values > summary").tap()
    headers = viewer.locator(".head-selector-table tbody th").all_inner_texts()
    assert len(headers) == len(set(headers)) == len(rows), headers
    assert not phone.problems, "\n".join(phone.problems)


@needs_site
def test_a_map_shown_twice_is_on_one_colour_scale(watch):
    """Chapter 5 shows its window's maps before and after training twice: as a figure and in the
    head viewer. Each map keeps its figure's colour scale in the viewer."""
    page = watch.open("chapters/05_bilstm_8_heads.html")
    scale = {}
    for name in ("fig-heads-untrained", "fig-heads-trained"):
        alt = page.locator(f"figure#{name} img").get_attribute("alt")
        scale[name] = re.search(r"colour from 0 to (\d+(?:\.\d+)?(?:e[+-]?\d+)?)", alt).group(1)
    viewer = page.locator("div.head-selector").first
    group = viewer.locator("select.head-selector-group")
    for option, name in (("after", "fig-heads-trained"), ("before", "fig-heads-untrained")):
        group.select_option(label=option)
        top = viewer.locator(".head-selector-legend > span:not(.head-selector-colorbar)").last.inner_text()
        assert float(top) == pytest.approx(float(scale[name]), rel=2e-3), (option, top, scale[name])
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_no_page_offers_its_myst_source():
    """The download menu offers the executed .ipynb and the printable page, not the MyST source
    (whose glue roles and directives are build input); the site holds no such source."""
    offered = [f"{_rel(p)}: {u}" for p in _pages() for t, _, u in _scan(p).urls
               if t == "a" and urlsplit(u).path.endswith((".md", ".txt")) and "_sources" in u]
    assert not offered, offered
    assert not list((SITE / "_sources").rglob("*.md")), "MyST sources copied into the site"


# ---------------------------------------------------------------------------------------------
# The widget's Python side (no build needed)
# ---------------------------------------------------------------------------------------------
def test_head_selector_markup_carries_the_weights_and_escapes_labels():
    np = pytest.importorskip("numpy")
    from mha_book.widgets import head_selector_html, head_selector_markup

    w = np.arange(2 * 3 * 4 * 5, dtype=float).reshape(2, 3, 4, 5) / 120
    html = head_selector_markup(w, ["a", "</script><b>", "c", "d"], list("vwxyz"),
                                title="T & <i>", group_label="Layer")
    data = re.search(r'<script type="application/json" class="head-selector-data">(.*?)</script>',
                     html, re.S)
    assert data, "the JSON data element is missing (or a label closed it early)"
    spec = json.loads(data.group(1))
    assert spec["heads"] == ["head 1", "head 2", "head 3"]
    assert spec["groups"] == ["Layer 1", "Layer 2"]
    assert spec["query"][1] == "</script><b>" and spec["key"] == list("vwxyz")
    assert spec["scale"] == 1000 and np.allclose(np.array(spec["weights"]) / 1000, np.round(w, 3))
    assert "<b>" not in html.replace(data.group(0), "") and "T &amp; &lt;i&gt;" in html
    assert html.count('class="head-selector-cell"') == 4 * 5    # the static picture: one head
    assert head_selector_html(w[0], list("abcd"), list("vwxyz"))._repr_html_().startswith(
        '<div class="head-selector"')


@pytest.mark.parametrize("shape, query, key, message", [
    ((4, 4), 4, None, "expected (heads, T_q, T_k)"),
    ((2, 3, 4), 2, None, "query_tokens: 2 labels for an axis of length 3"),
    ((2, 3, 4), 3, None, "query_tokens (used as keys): 3 labels for an axis of length 4"),
    ((2, 3, 4), 3, 5, "key_tokens: 5 labels for an axis of length 4"),
])
def test_head_selector_explains_a_wrong_shape(shape, query, key, message):
    np = pytest.importorskip("numpy")
    from mha_book.widgets import head_selector_markup

    with pytest.raises(ValueError, match=re.escape(message)):
        head_selector_markup(np.full(shape, 0.5), [f"q{i}" for i in range(query)],
                             None if key is None else [f"k{i}" for i in range(key)])


def test_head_selector_takes_labels_per_group():
    np = pytest.importorskip("numpy")
    from mha_book.widgets import head_selector_markup

    w = np.full((2, 1, 3, 3), 1 / 3)                     # (groups, heads, T, T)
    html_text = head_selector_markup(w, [list("abc"), list("xyz")])
    spec = json.loads(re.search(r'class="head-selector-data">(.*?)</script>', html_text, re.S).group(1))
    assert spec["query"] == [list("abc"), list("xyz")] and spec["key"] == spec["query"]
    assert ">a</text>" in html_text and ">x</text>" not in html_text   # the static picture: group 1
    with pytest.raises(ValueError, match=re.escape("query_tokens: 3 label lists for 2 groups")):
        head_selector_markup(w, [list("abc")] * 3)
    with pytest.raises(ValueError, match=re.escape("query_tokens[1]: 2 labels for an axis of length 3")):
        head_selector_markup(w, [list("abc"), list("xy")])
