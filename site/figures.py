"""Figures from chapter cells: a text alternative, a number and a caption, read from the SVG.

``mha_book.plotting.show(fig, point, caption=..., name=...)`` writes three things into the SVG's
metadata: ``dc:title`` (what the figure shows, for the ``<img alt>``), ``dc:description`` (the
caption) and ``dc:identifier`` (the name the text cites with ``{numref}`name```). Here

* :class:`NumberedFigures` (a read-phase transform) wraps each such output image in a figure with
  that caption and name, so Sphinx numbers it ("Fig. 5.2") and ``{numref}`` finds it; a cell
  output image without a caption is a warning (the strict build fails);
* :func:`figure_alt` puts the text alternative into the ``<img alt>`` (myst-nb would use the
  file's path); an SVG without one is a warning too;
* :func:`figure_numbers` gives the notebook export (site/notebook_export.py, which reads the same
  metadata) the numbers, so that it prints the same numbered caption under the figure.
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from notebook_export import svg_metadata

LOG = logging.getLogger(__name__)
_MATH = re.compile(r"(\$[^$]+\$)")
HOW = "show it with mha_book.plotting.show(fig, point, caption=..., name=...) (site/README.md, Figures)"


def _read_svg(env, uri: str, docname: str) -> str:
    """The SVG behind an image node ("" for another kind of image)."""
    # myst-nb's outputs are named from the source folder (_build/jupyter_execute/<hash>.svg)
    candidates = [Path(env.srcdir) / uri, Path(env.relfn2path(uri, docname)[1])]
    path = next((p for p in candidates if p.is_file()), None) if uri.endswith(".svg") else None
    return path.read_text(encoding="utf-8", errors="replace") if path else ""


def _in_cell_output(node) -> bool:
    return any(isinstance(a, nodes.container) and a.get("nb_element") == "cell_code_output"
               for a in _ancestors(node))


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def caption_nodes(text: str) -> list[nodes.Node]:
    """A caption's text, with ``$...$`` as maths (typeset like the page's other formulas)."""
    parts = [p for p in _MATH.split(text) if p]
    return [nodes.math(p, p[1:-1]) if _MATH.fullmatch(p) else nodes.Text(p) for p in parts]


class NumberedFigures(SphinxTransform):
    """Each cell output image with a caption becomes a numbered, named figure."""

    default_priority = 205      # before Sphinx numbers figures (AutoNumbering, 210)

    def apply(self, **kwargs) -> None:
        for image in list(self.document.findall(nodes.image)):
            if not _in_cell_output(image) or isinstance(image.parent, nodes.figure):
                continue
            meta = svg_metadata(_read_svg(self.env, image["uri"], self.env.docname))
            if not meta.caption:
                LOG.warning("%s: a figure without a caption: %s", self.env.docname, HOW, location=image)
                continue
            figure = nodes.figure("", classes=["course-figure"])
            image.replace_self(figure)
            figure += image
            figure += nodes.caption(meta.caption, "", *caption_nodes(meta.caption))
            figure["names"].append(meta.name)
            self.document.note_explicit_target(figure, figure)


def figure_alt(app, doctree, docname) -> None:
    """Every figure's alt text is what it shows, read from its SVG; a cell output image without
    one fails the strict build."""
    for node in doctree.findall(nodes.image):
        if node.get("alt") or not node["uri"].endswith(".svg"):
            continue
        alt = svg_metadata(_read_svg(app.env, node["uri"], docname)).alt
        if alt:
            node["alt"] = alt
        else:
            LOG.warning("%s: a figure without a text alternative (%s): %s", docname, node["uri"], HOW,
                        location=node)


def figure_numbers(env, docname: str) -> dict[str, str]:
    """name -> "Fig. 5.2" for the numbered figures of ``docname``, as the site prints them."""
    labels = env.get_domain("std").labels
    numbers = env.toc_fignumbers.get(docname, {}).get("figure", {})
    fmt = env.config.numfig_format.get("figure", "Fig. %s")
    return {name: fmt % ".".join(map(str, numbers[label_id]))
            for name, (doc, label_id, _) in labels.items() if doc == docname and label_id in numbers}


def setup(app) -> None:
    app.add_transform(NumberedFigures)
    app.connect("doctree-resolved", figure_alt)
