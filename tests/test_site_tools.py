"""The site's build helpers in site/ (no build needed): notebook export, search words, and the
maths typeset at build time (needs `make site-node`)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))

import math_prerender  # noqa: E402
import notebook_export  # noqa: E402
import search_math  # noqa: E402
import skip_links  # noqa: E402


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
