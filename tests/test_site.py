"""The built site in a real browser: Playwright drives Debian's Chromium over _build/html.

Everything is served from a loopback HTTP server started here; Chromium is told that no other
host exists (--host-resolver-rules) and every request to another host is aborted and reported.

* the site tests are skipped (with the reason) only when _build/html does not exist (`make test`
  builds it first); the widget's Python tests at the end always run;
* when Chromium is missing the browser tests are skipped on a workstation, and fail when CI=true.
"""
from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
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
    """Every page whose source is a notebook (the intro and the five chapters) offers its .ipynb."""
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
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        message = ("Debian's Chromium is not installed (`make browser`, or "
                   "`apt-get install chromium`); the browser tests need it")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # Playwright gives the browser a fresh temporary profile (--user-data-dir) itself.
        chromium = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


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
        self.page.on("requestfailed", lambda r: self.problems.append(
            f"request failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.base) or url.split(":", 1)[0] in ("data", "blob", "about"):
            route.continue_()
        else:
            self.problems.append(f"request to another host: {url}")
            route.abort()

    def _console(self, msg):
        if msg.type == "error":
            self.problems.append(f"console error: {msg.text}")

    def open(self, path):
        from playwright.sync_api import Error

        self.page.goto(self.base + path, wait_until="load")
        for attempt in range(3):  # index.html redirects (meta refresh) to the intro page
            try:
                self.page.wait_for_load_state("load")
                # MathJax typesets after load; wait for it (and for the fonts it then fetches).
                # (A MathJax that never finishes fails the test after 30 s instead of hanging it.)
                self.page.evaluate(
                    "() => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
                    " ? Promise.race([MathJax.startup.promise.then(() => true), new Promise("
                    "(_, no) => setTimeout(() => no(new Error('MathJax did not finish')), 30000))])"
                    " : true")
                self.page.wait_for_load_state("networkidle")
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


@needs_site
def test_every_page_loads_cleanly_offline_and_typesets_its_math(watch):
    with_math = []
    for page_file in _pages():
        rel = _rel(page_file)
        page = watch.open(rel)
        assert not watch.problems, f"{rel}:\n" + "\n".join(watch.problems)
        if re.search(r'class="math[ "]', page_file.read_text(encoding="utf-8")):
            with_math.append(rel)
            assert page.locator("mjx-container").count() > 0, f"{rel}: math not typeset"
            assert page.locator("mjx-merror").count() == 0, f"{rel}: a TeX error in its math"
    assert "chapters/intro.html" in with_math, "the intro page's equation was not found"


@needs_site
def test_math_speech_for_screen_readers_works_offline(watch):
    # A reader who turns on MathJax's explorer/speech makes MathJax load its speech-rule engine
    # and English math maps: they must come from the site (the copy includes sre/mathmaps).
    watch.context.add_init_script(
        "localStorage.setItem('MathJax-Menu-Settings', JSON.stringify({explorer: true}))")
    page = watch.open("chapters/intro.html")
    page.locator("mjx-container [data-semantic-speech]").first.wait_for(state="attached")
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_math_menu_loads_when_a_reader_asks_for_it(watch):
    # The menu (a third of MathJax) is not part of a first visit; a right-click (or a long press)
    # on a formula loads it and opens it.
    page = watch.open("chapters/intro.html")
    assert page.evaluate("!(MathJax._.ui && MathJax._.ui.menu)"), "the menu was loaded up front"
    page.locator("mjx-container").first.click(button="right")
    page.locator(".CtxtMenu_Menu").first.wait_for(state="visible")
    assert "Accessibility" in page.locator(".CtxtMenu_Menu").first.inner_text()
    assert page.locator("mjx-container").count() == page.locator("mjx-container.CtxtMenu_Attached_0").count()
    assert not watch.problems, "\n".join(watch.problems)


@needs_site
def test_math_menu_opens_from_the_keyboard(watch):
    page = watch.open("chapters/intro.html")
    first = page.locator("mjx-container").first
    assert first.get_attribute("tabindex") == "0", "formulas cannot be reached with Tab"
    first.focus()
    page.keyboard.press("Enter")
    page.locator(".CtxtMenu_Menu").first.wait_for(state="visible")
    assert not watch.problems, "\n".join(watch.problems)


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
PAGE_BUDGET = 1_900_000   # bytes for a first visit of the intro page: half of the 3.8 MB it was
WIDE = (".pst-scrollable-table-container, .bd-article pre, .bd-article div.math, "
        ".bd-article mjx-container[display='true'], .head-selector")
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
def test_every_page_loads_cleanly_on_a_dark_phone(phone):
    for page_file in _pages():
        page = phone.open(_rel(page_file))
        assert page.evaluate("document.documentElement.classList.contains('mathjax-pending')") is False
        assert not phone.problems, f"{_rel(page_file)}:\n" + "\n".join(phone.problems)


@needs_site
def test_raw_tex_stays_hidden_until_mathjax_has_typeset_it(browser, server):
    """While MathJax is on its way the TeX is invisible; if MathJax never comes, the TeX shows."""
    context = browser.new_context()
    held = []
    context.route("**/mathjax/**", lambda route: held.append(route))   # MathJax's requests wait...
    try:
        page = context.new_page()
        page.goto(server + "chapters/intro.html", wait_until="commit")
        math = page.locator("span.math").first
        math.wait_for(state="attached")
        assert "\\(" in math.text_content()                                 # the raw TeX is there,
        assert math.evaluate("e => getComputedStyle(e).visibility") == "hidden"  # but not shown
        for route in held:                                # ...then fail: the page must show the TeX
            route.abort()
        page.wait_for_function("!document.documentElement.classList.contains('mathjax-pending')")
        assert math.evaluate("e => getComputedStyle(e).visibility") == "visible"
    finally:
        context.close()


@needs_site
def test_first_visit_weight_of_the_intro_page(browser, server):
    """Cold cache: every byte the intro page transfers until MathJax and the network are idle."""
    watch = _Watch(browser, server, **PHONE)
    try:
        page = watch.open("chapters/intro.html")
        entries = page.evaluate("""() => performance.getEntriesByType('navigation')
            .concat(performance.getEntriesByType('resource')).map(e => [e.name, e.transferSize])""")
    finally:
        watch.close()
    total = sum(size for _, size in entries)
    biggest = sorted(entries, key=lambda e: -e[1])[:5]
    print(f"\nintro page, first visit: {total:,} bytes in {len(entries)} requests; largest: "
          + ", ".join(f"{urlsplit(u).path.rsplit('/', 1)[-1]} {s:,}" for u, s in biggest))
    assert all(size > 0 for _, size in entries), "a response came from a cache: not a cold visit"
    assert total <= PAGE_BUDGET, f"{total:,} bytes > {PAGE_BUDGET:,}"


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
    notation = re.compile(r"W\^\{?O\}?|W_\{?o\}?|\bw_o\b")
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
        nb = nbformat.reads(urlopen(url).read().decode("utf-8"), as_version=4)
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
