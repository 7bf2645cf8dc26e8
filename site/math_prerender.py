"""Maths rendered when the site is built: pages carry typeset formulas, not TeX and MathJax.

Sphinx writes each formula as MathJax expects it (``<span class="math ...">\\(...\\)</span>``,
``<div class="math ...">\\[...\\]</div>``), but through the renderer registered here, so no page
loads MathJax. After the build, :func:`render_site` sends every page's TeX to ``render_math.js``
(MathJax's node package, ``make site-node``), which returns CHTML with a hidden MathML copy for
screen readers; the formulas replace the TeX inside the same span/div (ids and equation numbers
stay), and each page gets the CHTML stylesheet of its own formulas. The TeX stays in each formula's
``data-tex`` attribute, so that copying prose puts its formulas on the clipboard as TeX
(course.js). A rendered formula has no TeX left between its tags, so a rebuild renders only the
pages Sphinx wrote again.

MathJax's TeX fonts hold every glyph of TeX (MathJax_AMS alone is 41 kB); after the pages are
typeset, :func:`subset_fonts` writes into the site copies that keep only the characters some
page's formulas draw (the ``content`` of the CHTML stylesheets' ``mjx-c`` rules), so a chapter's
fonts weigh a few kB each. The originals stay where ``make site-node`` put them.

Why not MathJax in the browser: it was about 0.8 MB of JavaScript on every page with maths, made
formulas Tab stops for its menu, and showed raw TeX until it had run.
"""
from __future__ import annotations

import html
import json
import logging
import os
import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).with_name("render_math.js")
FONTS = "mathjax/fonts"    # in the site: make site-node copies MathJax's TeX fonts there
MATH_CLASS = 'class="math notranslate nohighlight"'
INLINE = re.compile(r'(<span class="math notranslate nohighlight"[^>]*>)([^<]*)(</span>)')
DISPLAY = re.compile(r'(<div class="math notranslate nohighlight"[^>]*>\s*'
                     r'(?:<span class="eqno">(?:[^<]|<a [^>]*>[^<]*</a>)*</span>)?)([^<]*)(</div>)')
DELIMITERS = ((r"\(", r"\)"), (r"\[", r"\]"))
STYLE = re.compile(r'<style id="mathjax-chtml">(.*?)</style>', re.S)
CONTENT = re.compile(r'content:\s*"((?:[^"\\]|\\.)*)"')
CSS_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{1,6}) ?|\\(.)", re.S)


def setup(app) -> None:
    """Register the renderer: Sphinx's own MathJax markup, without MathJax's script."""
    from sphinx.ext import mathjax

    app.add_html_math_renderer("prerendered", (mathjax.html_visit_math, None),
                               (mathjax.html_visit_displaymath, None))


def _tex(markup: str) -> str:
    tex = html.unescape(markup).strip()
    for start, end in DELIMITERS:
        if tex.startswith(start) and tex.endswith(end):
            return tex[len(start):-len(end)].strip()
    return tex


def _formulas(text: str) -> list[tuple[re.Match, bool]]:
    found = [(m, False) for m in INLINE.finditer(text)] + [(m, True) for m in DISPLAY.finditer(text)]
    return sorted((f for f in found if f[0].group(2).strip()), key=lambda f: f[0].start())


def _splice(text: str, found: list[tuple[re.Match, bool]], rendered: dict) -> str:
    """The page with each formula's TeX replaced by its rendering; the TeX stays in the formula's
    ``data-tex`` attribute, which a reader's copy puts on the clipboard (course.js)."""
    out, last = [], 0
    for (match, _), chtml in zip(found, rendered["html"]):
        tex = html.escape(_tex(match.group(2)), quote=True)
        opening = match.group(1).replace(MATH_CLASS, f'{MATH_CLASS} data-tex="{tex}"', 1)
        out += [text[last:match.start(1)], opening, chtml]
        last = match.end(2)
    out.append(text[last:])
    style = f'<style id="mathjax-chtml">{rendered["css"]}</style>\n</head>'
    return "".join(out).replace("</head>", style, 1)


def render_site(outdir: Path, node_modules: Path) -> int:
    """Typeset the TeX of every page under ``outdir``; returns how many pages changed."""
    if not (node_modules / "mathjax-full").is_dir():
        raise RuntimeError(f"{node_modules}/mathjax-full is missing: run `make site-node` (make book does)")
    pages = []
    for path in sorted(outdir.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        found = _formulas(text)
        if found:
            pages.append((path, text, found))
    if not pages:
        return 0
    request = [{"page": path.relative_to(outdir).as_posix(),
                "font_url": os.path.relpath(outdir / FONTS, path.parent).replace(os.sep, "/"),
                "math": [[_tex(m.group(2)), display] for m, display in found]}
               for path, _, found in pages]
    run = subprocess.run(["node", str(SCRIPT), str(node_modules)], input=json.dumps(request),
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"rendering the maths failed: {run.stderr.strip()}")
    for (path, text, found), rendered in zip(pages, json.loads(run.stdout)):
        path.write_text(_splice(text, found, rendered), encoding="utf-8")
    return len(pages)


def drawn_characters(site: Path) -> set[int]:
    """Every character that a formula of the site draws with MathJax's fonts: the ``content`` of
    the pages' CHTML stylesheets (a glyph is named there, never in the markup)."""
    found: set[int] = set()
    for path in site.rglob("*.html"):
        for style in STYLE.findall(path.read_text(encoding="utf-8")):
            for value in CONTENT.findall(style):
                text = CSS_ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else m[2], value)
                found.update(map(ord, text))
    return found


def subset_fonts(site: Path, extra_roots: list[Path]) -> tuple[int, int]:
    """Write into ``site``'s copy of MathJax's fonts only the glyphs of :func:`drawn_characters`
    (each font from its original in one of ``extra_roots``); returns the fonts' total size before
    and after (bytes)."""
    from fontTools import subset

    logging.getLogger("fontTools").setLevel(logging.WARNING)   # its INFO lines (~700) flooded the build log
    options = subset.Options(flavor="woff", name_IDs=["*"], name_languages=["*"], name_legacy=True,
                             notdef_outline=True, layout_features=["*"],   # names and licence kept
                             drop_tables=subset.Options().drop_tables + ["FFTM"])   # FontForge's timestamp
    characters = drawn_characters(site)
    before = after = 0
    for root in (r / FONTS for r in extra_roots if (r / FONTS).is_dir()):
        for original in sorted(root.glob("*.woff")):
            font = subset.load_font(str(original), options)   # timestamps kept: same input, same bytes
            subsetter = subset.Subsetter(options)
            subsetter.populate(unicodes=characters)
            subsetter.subset(font)
            target = site / FONTS / original.name
            subset.save_font(font, str(target), options)
            before, after = before + original.stat().st_size, after + target.stat().st_size
    return before, after
