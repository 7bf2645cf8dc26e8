"""Sphinx extension for the course site (loaded by _config.yml, ``sphinx.local_extensions``).

* **Addresses are settings.** ``repository.url``, ``launch_buttons.binderhub_url`` and
  ``launch_buttons.jupyterhub_url`` in _config.yml: a button appears only when its address is
  set (Binder and JupyterHub also need the repository, since they open the chapter from it).
* **Downloads.** Every notebook page's download menu offers its ``.ipynb``: the executed chapter
  rewritten by :mod:`notebook_export` as a plain Jupyter notebook (values, outputs, closed
  answers), and no MyST source (``.md``, whose glue roles and directives no reader can use).
  The student kit (:mod:`student_kit`) goes to ``downloads/mha-student-kit.zip``.
* **Lighter pages.** :mod:`icons` replaces the theme's 1.5 MB icon bundle by the icons used.
* **Search for notation.** :mod:`search_math`: ``W^O`` is one search word, snippets show no TeX.
* **Maths typeset at build time.** :mod:`math_prerender`: pages carry CHTML and MathML, no MathJax.
* **Skip links.** :mod:`skip_links`: from the top of a page, a few key presses reach each head
  viewer and each section's answers.
* **Figures.** :mod:`figures`: a chapter's figure is numbered and captioned, with a text
  alternative, from what ``mha_book.plotting.show`` wrote into its SVG.
* **Answers named after their question.** :mod:`answer_names`: "Answer to Quiz 2", not "Answer".
* **Search from disk.** :mod:`search_pages`: opened as ``file://``, the search shows snippets too.
* **A landing page that names the site's icon.** The site's root, ``index.html``, forwards to the
  first chapter; sphinx-external-toc writes it as one bare ``<meta>`` line, which names no icon, so
  every first visit also asked for ``/favicon.ico`` (a 404). :func:`write_landing` writes it whole.
"""
from __future__ import annotations

import base64
import html
import json
import mimetypes
import shutil
from pathlib import Path

from sphinx.util import logging
from sphinx.util import docname_join

import answer_names
import figures
import icons
import math_prerender
import notebook_export
import search_math
import search_pages
import skip_links
import student_kit

LOG = logging.getLogger(__name__)
KIT_PATH = "downloads/mha-student-kit.zip"    # relative to the site root (chapters/exercises.md links it)
LAUNCH_KEYS = ("binderhub_url", "jupyterhub_url")
RAW_TEMPLATES = ("webpack-macros.html", "sbt-webpack-macros.html", "copybutton.js_t")
NODE_MODULES = ".cache/node/node_modules"    # `make site-node`: mathjax-full (and axe-core for the tests)


def hide_unset_buttons(app, config):
    """Show the repository and launch buttons only for addresses that are set."""
    opts = config.html_theme_options
    opts["use_fullscreen_button"] = False    # a phone has no room for it; browsers have F11
    repo = str(opts.get("repository_url") or "").strip()
    opts["repository_url"] = repo
    opts["use_repository_button"] = bool(repo)
    launch = opts.setdefault("launch_buttons", {})
    for key in LAUNCH_KEYS:
        if not repo or not str(launch.get(key) or "").strip():
            launch.pop(key, None)


def visit_hidden_cell(self, node) -> None:
    """myst-nb's "Show code cell source" toggle, named by its visible text: myst-nb 1.4 gives the
    <summary> an aria-label "Toggle hidden content" that matches no word on screen (WCAG 2.5.3)."""
    self.body.append(f'<details class="admonition hide {" ".join(node["classes"])}">\n<summary>\n'
                     f'<p class="collapsed admonition-title">{html.escape(node["prompt_show"])}</p>\n'
                     f'<p class="expanded admonition-title">{html.escape(node["prompt_hide"])}</p>\n</summary>\n')


def offer_ipynb(app, pagename, templatename, context, doctree):
    """Put the .ipynb into the download menu of every notebook page (runs before the theme's
    header buttons are made; with no launch button set, the theme would leave it out)."""
    from sphinx_book_theme.header_buttons.launch import _is_notebook

    if doctree is not None and _is_notebook(app, context):
        context.setdefault("ipynb_source", pagename + ".ipynb")


def drop_source_download(app, pagename, templatename, context, doctree):
    """No MyST source in the download menu (its glue roles and directives are build input, not
    something a reader can run or read); the .ipynb and the printable page stay."""
    for button in context.get("header_buttons", []):
        if button.get("label") == "download-buttons":
            button["buttons"] = [b for b in button["buttons"] if b.get("label") != "download-source-button"]


def _exporter(app, docname: str, nb: dict, glue: dict) -> notebook_export.MarkdownExporter:
    env = app.env
    labels = env.get_domain("std").labels

    def resolve_ref(label):
        doc, _, title = labels.get(label, (None, None, label))
        return title, (f"#{label}" if doc == docname else None)

    def resolve_doc(target):
        other = docname_join(docname, target)
        return env.titles[other].astext() if other in env.titles else target

    return notebook_export.MarkdownExporter(notebook_export.glue_values(nb, glue), resolve_ref,
                                            resolve_doc, Path(env.doc2path(docname)).parent,
                                            figures.figure_numbers(env, docname))


def _executed(app, source: Path) -> dict:
    """The executed notebook of a chapter, with its outputs.

    myst-nb 1.4 writes ``jupyter_execute/<doc>.ipynb`` with outputs only when it has just run the
    notebook; for a notebook taken from jupyter-cache it writes the unexecuted one. The outputs are
    then merged from the cache (the same cells, so the same cache entry).
    """
    import nbformat
    from jupyter_cache import get_cache

    nb = nbformat.read(source, as_version=4)
    if any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"):
        return nb
    cache_path = app.env.mystnb_config.execution_cache_path or Path(app.outdir).parent / ".jupyter_cache"
    _, merged = get_cache(cache_path).merge_match_into_notebook(nb)
    return merged


def export_notebooks(app) -> int:
    executed = Path(app.outdir).parent / "jupyter_execute"
    count = 0
    for docname in sorted(app.env.found_docs):
        source = executed / f"{docname}.ipynb"
        if not source.is_file():
            continue
        nb = _executed(app, source)
        glue_file = source.with_suffix(".glue.json")
        glue = json.loads(glue_file.read_text(encoding="utf-8")) if glue_file.is_file() else {}
        clean = notebook_export.export_notebook(nb, _exporter(app, docname, nb, glue))
        target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(clean, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        count += 1
    return count


def _sync(src_dir: Path, dest_dir: Path) -> None:
    for src in (p for p in src_dir.rglob("*") if p.is_file()):
        dest = dest_dir / src.relative_to(src_dir)
        if not dest.is_file() or dest.read_bytes() != src.read_bytes():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)


def sync_assets(app) -> None:
    """When no page is out of date, Sphinx stops before copying static and extra files: an edit
    to site/static/*.js or a new MathJax file would not reach the site. Copy what changed."""
    for entry in app.config.html_static_path:
        _sync(Path(app.confdir) / entry, Path(app.outdir) / "_static")
    for entry in app.config.html_extra_path:
        _sync(Path(app.confdir) / entry, Path(app.outdir))


LANDING = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
{icon}<meta http-equiv="refresh" content="0; url={first}">
</head>
<body>
<p><a href="{first}">{title}: start reading</a></p>
</body>
</html>
"""


def write_landing(app) -> None:
    """The site's root page: it forwards to the root document at once, like the theme's redirect,
    and names the site's icon (no browser then asks for /favicon.ico). The icon is inlined as a
    data: URL: a request for it would be cut short by the forward."""
    icon = str(app.config.html_favicon or "")
    href = icon
    if icon and "://" not in icon:
        path = Path(app.confdir) / icon
        kind = mimetypes.guess_type(path.name)[0] or "image/x-icon"
        href = f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode()}"
    first = app.builder.get_target_uri(app.config.root_doc)
    (Path(app.outdir) / "index.html").write_text(LANDING.format(
        title=html.escape(app.config.html_title or app.config.project), first=html.escape(first),
        icon=f'<link rel="icon" href="{html.escape(href)}">\n' if icon else ""), encoding="utf-8")


def finish(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    sync_assets(app)
    if app.config.root_doc != "index":
        write_landing(app)
    node_modules = Path(app.confdir) / NODE_MODULES
    LOG.info("course_site: maths typeset on %d pages",
             math_prerender.render_site(Path(app.outdir), node_modules))
    LOG.info("course_site: %d notebooks exported for download", export_notebooks(app))
    LOG.info("course_site: search snippets for file:// (%d kB)", search_pages.write_pages(Path(app.outdir)) // 1000)
    root = Path(app.srcdir)
    kit = student_kit.build_kit(root, Path(app.outdir) / KIT_PATH)
    LOG.info("course_site: student kit %s (%d kB)", kit.name, kit.stat().st_size // 1000)
    icons.subset_theme_icons(Path(app.outdir))
    for template in RAW_TEMPLATES:     # theme files that are Jinja source, not pages
        (Path(app.outdir) / "_static" / template).unlink(missing_ok=True)


def setup(app):
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput

    answer_names.setup(app)
    figures.setup(app)
    math_prerender.setup(app)
    skip_links.setup(app)
    app.add_node(HideCodeCellNode, override=True, html=(visit_hidden_cell, depart_HideCellInput))
    app.add_search_language(search_math.MathAwareEnglish)
    app.connect("config-inited", hide_unset_buttons, priority=900)
    app.connect("html-page-context", offer_ipynb, priority=500)
    app.connect("html-page-context", drop_source_download, priority=900)   # after the theme's buttons
    app.connect("build-finished", finish)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
