"""The site's build helpers in site/ (no build needed): notebook export, search words, the maths
typeset at build time (needs `make site-node`), the CSS purge, the MathJax font subsets, the
pre-compressed files and the server that sends them."""
from __future__ import annotations

import functools
import gzip
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))

import css_purge  # noqa: E402
import math_prerender  # noqa: E402
import notebook_export  # noqa: E402
import precompress  # noqa: E402
import search_math  # noqa: E402
import skip_links  # noqa: E402
import static_server  # noqa: E402


@pytest.mark.parametrize("tex, words", [
    (r"W^O", ["w_o"]), (r"W^{O}", ["w_o"]), (r"W_o", ["w_o"]),
    (r"W_i^Q", ["w_i_q"]), (r"W^Q_i", ["w_i_q"]),
    (r"d_{\text{model}}", ["d_model"]), (r"QK^\top/\sqrt{d_k}", ["k_top", "d_k"]),
    (r"\alpha_i + x", []), ("plain words", []),
])
def test_math_notation_becomes_one_search_word(tex, words):
    assert search_math.math_words(tex) == words


def test_search_language_indexes_the_notation_and_the_words():
    lang = search_math.MathAwareEnglish({})
    assert {"the", "matrix", "w_o"} <= set(w.lower() for w in lang.split(r"the matrix \(W^O\)"))
    assert "splitQuery" in lang.js_splitter_code and "mathWords" in lang.js_splitter_code


def _exporter(tmp_path, glue=None):
    labels = {"sec-a": ("here", "Section A"), "sec-b": ("elsewhere", "Section B")}

    def resolve_ref(label):
        doc, title = labels.get(label, ("elsewhere", label))
        return title, (f"#{label}" if doc == "here" else None)

    return notebook_export.MarkdownExporter(
        glue or {"n": {"text/plain": "1234"}, "x": {"text/plain": "0.78234"}, "s": {"text/plain": "'abc'"}},
        resolve_ref, lambda target: f"Title of {target}", tmp_path)


def test_markdown_export_turns_myst_into_plain_markdown(tmp_path):
    (tmp_path / "frag.md").write_text("Included {glue:text}`n:,` words.\n")
    source = "\n".join([
        "(sec-a)=",
        "## A",
        "% a comment",
        "n = {glue:text}`n:,`, x = {glue:text}`x:.3f`, s = {glue:text}`s`; see {ref}`sec-b`,",
        "{ref}`back <sec-a>`, {doc}`02_committee` and {download}`the file <x.ipynb>`.",
        ":::{admonition} Erratum — a title",
        ":class: warning",
        "Body with $W^O$.",
        "::::{dropdown} Answer",
        "Hidden answer.",
        "::::",
        ":::",
        "```{include} frag.md",
        "```",
        "```python",
        "{glue:text}`kept` inside code",
        "```",
    ])
    md = _exporter(tmp_path).convert(source)
    assert '<a id="sec-a"></a>' in md and "a comment" not in md
    assert "n = 1,234, x = 0.782, s = abc; see *Section B*," in md
    assert "[back](#sec-a), *Title of 02_committee* and the file." in md
    assert "> **⚠ Erratum — a title**" in md and "> Body with $W^O$." in md
    assert "<details><summary><b>Answer</b></summary>" in md and "> Hidden answer." in md
    assert "Included 1,234 words." in md
    assert "{glue:text}`kept` inside code" in md        # code blocks are copied verbatim
    nb = {"cells": [{"cell_type": "markdown", "source": md}]}
    assert notebook_export.leftover_myst(nb) == ["{glue:text}`kept`"]


def test_export_keeps_outputs_drops_glue_records_and_makes_glue_optional(tmp_path):
    glue_out = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "n", "mime_prefix": "x"}},
                "data": {notebook_export.GLUE_PREFIX + "text/plain": "7"}}
    shown = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    nb = {"metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {"tags": ["remove-cell"]}, "source": "from myst_nb import glue\nglue('n', 7)",
         "outputs": [glue_out, shown], "execution_count": 1},
        {"cell_type": "markdown", "metadata": {}, "source": "n is {glue:text}`n`"},
    ]}
    glue = notebook_export.glue_values(nb)
    out = notebook_export.export_notebook(nb, _exporter(tmp_path, glue))
    code, text = out["cells"]
    assert code["outputs"] == [shown] and code["metadata"]["jupyter"]["source_hidden"] is True
    assert "except ImportError" in code["source"] and text["source"] == "n is 7"
    assert nb["cells"][1]["source"] == "n is {glue:text}`n`"     # the input is not modified
    with pytest.raises(KeyError, match="missing"):
        _exporter(tmp_path, glue).convert("{glue:text}`missing`")


def test_glued_figures_and_image_files_become_attachments(tmp_path):
    (tmp_path / "pic.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    exporter = _exporter(tmp_path, {"fig": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}})
    md = exporter.convert("\n".join([
        "See {numref}`fig-a`.", "```{glue:figure} fig", ":name: fig-a", "", "The caption.", "```",
        "```{figure} pic.svg", ":name: fig-b", "", "A file.", "```"]))
    assert "![The caption.](attachment:fig.png)" in md and '<a id="fig-a"></a>' in md
    assert "![A file.](attachment:pic.svg)" in md
    assert exporter.attachments == {"fig.png": {"image/png": "iVBORw0KGgo="},
                                    "pic.svg": {"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'/>"}}


def test_a_shown_figure_gets_its_numbered_caption_and_answers_their_questions_name(tmp_path):
    """What mha_book.plotting.show wrote into the SVG becomes a numbered caption under the cell
    ({numref} prints the same number); an answer is named after the bold label of its question."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.display import SVG

    from mha_book import plotting

    shown = []
    fig, ax = plt.subplots(figsize=(plotting.FIGURE_WIDTH, 2))
    ax.plot([1, 2], [3, 4], label="cost")
    import IPython.display
    display, IPython.display.display = IPython.display.display, shown.append
    try:
        plotting.show(fig, "It rises.", caption="Cost against $n$ & more.", name="fig-cost")
    finally:
        IPython.display.display = display
    assert isinstance(shown[0], SVG)
    meta = notebook_export.svg_metadata(shown[0].data)
    assert meta == notebook_export.SvgMetadata(meta.alt, "Cost against $n$ & more.", "fig-cost") and "It rises." in meta.alt
    exporter = notebook_export.MarkdownExporter({}, lambda label: (label, None), str, tmp_path, {"fig-cost": "Fig. 7"})
    nb = {"metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": "show()", "execution_count": 1,
         "outputs": [{"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": shown[0].data}}]},
        {"cell_type": "markdown", "metadata": {}, "source": "As {numref}`fig-cost` shows.\n\n**Quiz 2.** Why?"},
        {"cell_type": "markdown", "metadata": {}, "source": "::::{dropdown} Answer\nBecause.\n::::"},
    ]}
    out = notebook_export.export_notebook(nb, exporter)
    texts = [c["source"] for c in out["cells"]]
    assert texts[1] == '<a id="fig-cost"></a>\n\n*Fig. 7* Cost against $n$ & more.'
    assert texts[2].startswith("As [Fig. 7](#fig-cost) shows.")
    assert "<summary><b>Answer to Quiz 2</b></summary>" in texts[3]


def test_show_refuses_a_figure_too_wide_for_a_phone():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha_book import plotting

    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    for ax in axes:
        ax.plot([1, 2], [3, 4])
    with pytest.raises(ValueError, match=r"too wide for a phone: drawn 10.0 in wide, its smallest label shrinks to [\d.]+ CSS px"):
        plotting.show(fig, "x", caption="c", name="fig-x")
    with pytest.raises(ValueError, match="needs a name"):
        plotting.show(plt.figure(figsize=(3, 2)), "x", caption="c")


NODE_MODULES = Path(__file__).resolve().parents[1] / ".cache" / "node" / "node_modules"
needs_mathjax = pytest.mark.skipif(not (NODE_MODULES / "mathjax-full").is_dir(),
                                   reason="mathjax-full is not installed: run `make site-node`")
PAGE = """<html><head><title>t</title></head><body>
<p>A <span class="math notranslate nohighlight">\\(W^O &lt; x\\)</span> inline.</p>
<div class="math notranslate nohighlight" id="equation-a">
<span class="eqno">(1)<a class="headerlink" href="#equation-a" title="Link">#</a></span>\\[\\frac{1}{\\sqrt{d_k}}\\]</div>
<pre>\\(not maths\\)</pre></body></html>"""


@needs_mathjax
def test_maths_is_typeset_in_place_with_mathml_and_a_stylesheet(tmp_path):
    (tmp_path / "chapters").mkdir()
    page = tmp_path / "chapters" / "x.html"
    page.write_text(PAGE)
    assert math_prerender.render_site(tmp_path, NODE_MODULES) == 1
    out = page.read_text()
    assert out.count("<mjx-container") == 2 and out.count("<math") == 2
    assert "<mi>W</mi>" in out and "<mo>&lt;</mo>" in out and "<msqrt>" in out
    assert '<span class="eqno">(1)' in out and 'id="equation-a"' in out    # number and anchor kept
    assert "\\frac" not in re.sub(r"<[^>]+>", "", out) and "<pre>\\(not maths\\)</pre>" in out   # no TeX shown
    assert 'data-tex="\\frac{1}{\\sqrt{d_k}}"' in out          # kept for copying (course.js)
    assert '<style id="mathjax-chtml">' in out and 'url("../mathjax/fonts/MathJax_Main-Regular.woff")' in out
    assert math_prerender.render_site(tmp_path, NODE_MODULES) == 0               # nothing left to do


@needs_mathjax
def test_a_tex_error_fails_with_the_page_and_the_formula(tmp_path):
    (tmp_path / "bad.html").write_text(
        '<html><head></head><body><span class="math notranslate nohighlight">\\(\\frac{1}{\\)</span></body></html>')
    with pytest.raises(RuntimeError, match=r"bad\.html: TeX error in .*frac.*Missing"):
        math_prerender.render_site(tmp_path, NODE_MODULES)


def test_skip_links_name_each_head_viewer_and_each_sections_answers():
    """site/skip_links.py on a small doctree: one link per viewer, one per section of dropdowns,
    each with an id to jump to (the built site's test follows them in a browser)."""
    np = pytest.importorskip("numpy")
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document
    from mha_book.widgets import head_selector_markup

    doctree = new_document("page", get_default_settings(Parser))

    def dropdown(title):
        return nodes.container("", nodes.rubric(text=title), nodes.paragraph(text="..."),
                               classes=["sd-dropdown"])

    viewer = nodes.raw("", head_selector_markup(np.full((2, 3, 3), 1 / 3), list("abc"), title="Two heads"),
                       format="html")
    quiz = nodes.section("", nodes.title(text="Check yourself"), dropdown("Answer"), dropdown("Answer"))
    lone = nodes.section("", nodes.title(text="A first look"), dropdown("Quiz: what is a head?"))
    doctree += [nodes.section("", nodes.title(text="Intro"), viewer), quiz, lone]
    skip_links.mark_targets(None, doctree, "page")
    assert doctree[skip_links.CONTEXT_KEY] == [
        ("#head-viewer-1", "Head viewer: Two heads"), ("#answers-1", "Check yourself: 2 answers"),
        ("#answers-2", "Quiz: what is a head?")]
    assert viewer["ids"] == ["head-viewer-1"] and viewer["classes"], "the id needs a <div> around the raw HTML"
    assert quiz[1]["ids"] == ["answers-1"] and not quiz[2]["ids"]


# ---------------------------------------------------------------------------------------------
# Lighter pages: the CSS purge, MathJax's font subsets, pre-compressed files and their server
# ---------------------------------------------------------------------------------------------
SHEET = """@charset "UTF-8";
/*! Licence: kept */
/* a comment that goes */
:root { --used: red; --via-used: var(--used2); --used2: 1px; --unused: blue; --chain: var(--unused2); --unused2: 2px }
html[data-theme=dark] .bd-page, .modal-backdrop { color: var(--used) }
.bd-page:hover > p::before, p:not(.never-seen) { margin: var(--via-used) }
.drawer-open .bd-sidebar { left: 0 }
.bs-tooltip-auto[data-popper-placement^=top] .tooltip-arrow { top: 0 }
kbd, .never-seen { font-family: "Used Font" }
@media (max-width: 960px) { .never-seen { color: blue } .bd-page { padding: 0 } }
@media print { .never-seen { display: none } }
@keyframes spin { to { transform: rotate(1turn) } }
@keyframes never { to { opacity: 0 } }
.bd-page p { animation: spin 1s; content: "\\203A" }
@font-face { font-family: "Used Font"; src: url(u.woff) }
@font-face { font-family: "Unused Font"; src: url(n.woff) }
.bd-page { color: red; & p { color: blue } }
"""


def test_purge_keeps_what_the_pages_and_scripts_name_and_drops_the_rest():
    names = css_purge.Names(tags={"html", "body", "p", "div"}, attributes={"data-theme", "class"},
                            classes={"bd-page"}, words={"drawer-open", "bd-sidebar", "tooltip-arrow",
                                                        "data-popper-placement", "bs-tooltip-auto"})
    css = css_purge.purge({"a.css": SHEET}, names)["a.css"]
    assert css.startswith('@charset "UTF-8";\n/*! Licence: kept */')          # licence comment stays
    assert "a comment" not in css
    assert 'html[data-theme=dark] .bd-page{color:var(--used)}' in css           # .modal-backdrop went
    assert ".bd-page:hover > p::before,p:not(.never-seen){margin:var(--via-used)}" in css   # states stay
    assert ".drawer-open .bd-sidebar{left:0}" in css                            # a class a script adds
    assert ".bs-tooltip-auto[data-popper-placement^=top] .tooltip-arrow{top:0}" in css
    assert "kbd" not in css and ".never-seen{" not in css and "@media print" not in css
    assert "@media (max-width: 960px){\n.bd-page{padding:0}\n}" in css           # purged inside
    assert "@keyframes spin" in css and "@keyframes never" not in css
    assert '"Used Font"' not in css and "Unused Font" not in css                # no kept rule names them
    assert ":root{--used:red;--via-used:var(--used2);--used2:1px}" in css       # read, even through one another
    assert 'content:"\\203a "' in css                                            # ASCII, whatever the charset
    assert ".bd-page{color: red; & p {color: blue}}" in css                         # nested rules kept whole
    nested = css_purge.purge({"b.css": ":root { --deep: 3px; --none: 4px }\n@keyframes pulse { to { opacity: 0 } }\n"
                                       ".bd-page { & p { margin: var(--deep); animation: pulse 1s } }"}, names)["b.css"]
    assert ":root{--deep:3px}" in nested and "@keyframes pulse" in nested       # what a nested rule reads stays


def test_purge_reads_names_from_the_pages_and_the_scripts_they_load(tmp_path):
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "app.js").write_text('el.classList.add("is-open"); x = `kind-${k}`;')
    (tmp_path / "_static" / "unused.js").write_text('el.classList.add("never-loaded");')
    (tmp_path / "_static" / "a.css").write_text(
        ".is-open{a:b}.never-loaded{a:b}.kept .inline-word{a:b}#top{a:b}p[hidden]{a:b}svg{a:b}\n")
    (tmp_path / "index.html").write_text(
        '<html><body id="top"><p hidden class="kept x">t</p><script src="_static/app.js"></script>'
        '<script>var c = "inline-word";</script><link rel="stylesheet" href="_static/a.css?v=1"></body></html>')
    before, after = css_purge.purge_site(tmp_path)
    css = (tmp_path / "_static" / "a.css").read_text()
    assert css == ".is-open{a:b}\n.kept .inline-word{a:b}\n#top{a:b}\np[hidden]{a:b}\n" and after < before
    version = css_purge._sha(css.encode())[:8]
    assert f'href="_static/a.css?v={version}"' in (tmp_path / "index.html").read_text()
    kept = tmp_path.parent / css_purge.ORIGINALS / "_static" / "a.css"
    assert "never-loaded" in kept.read_text()                                    # the original, kept aside
    (tmp_path / "index.html").write_text('<html><body><svg></svg><link href="_static/a.css"></body></html>')
    css_purge.purge_site(tmp_path)                                               # a rebuild: from the original
    assert (tmp_path / "_static" / "a.css").read_text() == "svg{a:b}\n"


def test_fonts_keep_the_characters_the_formulas_draw(tmp_path):
    from fontTools.ttLib import TTFont

    source = NODE_MODULES / "mathjax-full" / "es5" / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff"
    if not source.is_file():
        pytest.skip("mathjax-full is not installed: run `make site-node`")
    fonts = tmp_path / "extra" / math_prerender.FONTS
    fonts.mkdir(parents=True)
    shutil.copy(source, fonts)
    site = tmp_path / "html"
    (site / math_prerender.FONTS).mkdir(parents=True)
    (site / "p.html").write_text('<style id="mathjax-chtml">mjx-c.mjx-c3D::before { content: "="; }\n'
                                 'mjx-c.mjx-c221A::before { content: "\\221A"; }</style>')
    assert math_prerender.drawn_characters(site) == {ord("="), 0x221A}
    before, after = math_prerender.subset_fonts(site, [tmp_path / "extra"])
    assert before == source.stat().st_size and after < before / 4
    font = TTFont(site / math_prerender.FONTS / source.name)
    assert set(font.getBestCmap()) == {ord("="), 0x221A} and font.flavor == "woff"
    assert "MathJax" in font["name"].getDebugName(1)                             # its names kept


def test_text_files_get_gzip_and_brotli_variants_once(tmp_path):
    import brotli

    page = tmp_path / "a.html"
    page.write_text("<p>hello</p>\n" * 200)
    (tmp_path / "f.woff").write_bytes(b"wOFF" * 300)
    (tmp_path / "tiny.css").write_text("a{}")
    assert precompress.compress_site(tmp_path) == 2
    assert gzip.decompress((tmp_path / "a.html.gz").read_bytes()) == page.read_bytes()
    assert brotli.decompress((tmp_path / "a.html.br").read_bytes()) == page.read_bytes()
    assert not (tmp_path / "f.woff.gz").exists() and not (tmp_path / "tiny.css.gz").exists()   # no gain
    assert precompress.compress_site(tmp_path) == 1           # a.html is current; tiny.css is retried
    page.unlink()
    precompress.compress_site(tmp_path)
    assert not (tmp_path / "a.html.gz").exists() and not (tmp_path / "a.html.br").exists()


@pytest.mark.parametrize("header, codings", [
    ("gzip, deflate, br, zstd", {"br", "gzip"}), ("gzip", {"gzip"}), ("br;q=0, gzip;q=0.5", {"gzip"}),
    ("*", {"br", "gzip"}), ("*;q=0.1, gzip;q=0", {"br"}), ("identity", set()), (None, set()),
    ("GZIP;q=bad", set()),
])
def test_accept_encoding_is_read_with_its_weights(header, codings):
    assert static_server.accepted(header) == codings


def test_the_server_sends_the_variant_the_browser_accepts(tmp_path):
    import brotli
    import http.client
    import http.server
    import threading

    body = "<p>hello</p>\n" * 200
    (tmp_path / "index.html").write_text(body)
    (tmp_path / "plain.txt").write_text("x")
    precompress.compress_site(tmp_path)
    handler = functools.partial(static_server.Handler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def get(path, accept=None, method="GET"):
        conn = http.client.HTTPConnection("127.0.0.1", httpd.server_address[1], timeout=10)
        conn.request(method, path, headers={"Accept-Encoding": accept} if accept else {})
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response, data

    try:
        for accept, coding, decode in [("gzip, deflate, br", "br", brotli.decompress),
                                       ("gzip", "gzip", gzip.decompress), (None, None, bytes)]:
            response, data = get("/", accept)
            assert response.status == 200 and response.getheader("Content-Encoding") == coding
            assert response.getheader("Content-Type") == "text/html"
            assert response.getheader("Vary") == "Accept-Encoding"
            assert int(response.getheader("Content-Length")) == len(data)
            assert decode(data).decode() == body
        response, data = get("/index.html", "br", method="HEAD")
        assert response.getheader("Content-Encoding") == "br" and data == b""
        response, data = get("/plain.txt", "gzip, br")         # no variant: sent as it is, no Vary
        assert data == b"x" and response.getheader("Content-Encoding") is None and response.getheader("Vary") is None
        assert get("/missing.html", "gzip")[0].status == 404
    finally:
        httpd.shutdown()
        httpd.server_close()
