"""Skip links to the interactive parts of a page (WCAG 2.4.1, bypass blocks), made at build time.

From the top of a chapter, a keyboard user tabs through the sidebar, the header's buttons and
every code cell's copy button before reaching the first head viewer (48 Tab presses in chapter 4).
Next to the theme's "Skip to main content", a page with head viewers or dropdowns (answers,
solutions) gets a list "Interactive on this page", hidden until one of its links has the focus,
like the theme's own (``site/templates/layout.html``; ``course.css`` styles it):

* each head viewer (:mod:`mha_book.widgets`), "Head viewer: <its title>", jumps to the viewer's
  box: the next Tab lands on its first select;
* each section's dropdowns, "<section title>: 3 answers", jump to the first of them: the next Tab
  lands on its summary.

So the k-th item is k + 1 Tab presses away, and its first control one Enter and one Tab more.

A keyboard user who does not know skip links tabs past that strip, through the sidebar and the
header, then through every code cell's copy button and scrolling box to the viewer (57 to 71 Tab
presses in chapter 2). So the same links also stand, visible to every reader, under the page's
title, where a reader looks first (:func:`show_under_title`): they are the article's first Tab stop,
a little over 20 presses from page load (``bench/keyboard_reach.py`` measures both routes).
"""
from __future__ import annotations

import html
import json
import re

from docutils import nodes

VIEWER_DATA = re.compile(r'<script type="application/json" class="head-selector-data">(.*?)</script>', re.S)
CONTEXT_KEY = "course_skip_links"     # the template's variable: [(href, label), ...]


def _is_dropdown(node) -> bool:
    return isinstance(node, nodes.Element) and "sd-dropdown" in node.get("classes", ())


def _is_viewer(node) -> bool:
    return (isinstance(node, nodes.raw) and "html" in node.get("format", "").split()
            and VIEWER_DATA.search(node.astext()) is not None)


def _anchor(doctree, node, stem: str) -> str:
    """The node's first id, or a new one (``stem-1``, ``stem-2``...) unique in the page. A raw
    node gets a class, so that Sphinx writes it inside a <div> that carries the id."""
    if not node["ids"]:
        n = 1
        while f"{stem}-{n}" in doctree.ids:
            n += 1
        node["ids"].append(f"{stem}-{n}")
        doctree.ids[node["ids"][0]] = node
    if isinstance(node, nodes.raw) and not node["classes"]:
        node["classes"].append("head-selector-box")
    return node["ids"][0]


def _title_text(node) -> str:
    """A dropdown's title as read (its chevron is a raw <svg>)."""
    return "".join(t.astext() for t in node[0].findall(nodes.Text)
                   if not isinstance(t.parent, nodes.raw)).strip() if len(node) else ""


GENERIC = ("answer", "solution")     # dropdown titles that say what they hold, not what about


def _answers_label(section, titles: list[str]) -> str:
    """"Check yourself: 3 answers" (the titles' shared first word: "Answer to Quiz 2" is an
    answer); a lone dropdown with a telling title is named by it."""
    first_words = {t.split()[0].lower() for t in titles if t.split()}
    word = first_words.pop() if len(first_words) == 1 else "question"
    if len(titles) == 1 and len(titles[0].split()) > 2 and word not in GENERIC:
        return titles[0]
    heading = section[0].astext() if section is not None else "This page"
    return f"{heading}: {len(titles)} {word}{'s' if len(titles) > 1 else ''}"


def mark_targets(app, doctree, docname) -> None:
    """doctree-resolved: give each target an id and keep the page's links on the doctree."""
    links, groups = [], {}      # groups: section -> (its link's index, its dropdowns' titles)
    for node in doctree.findall(lambda n: _is_viewer(n) or _is_dropdown(n)):
        if _is_viewer(node):
            title = json.loads(VIEWER_DATA.search(node.astext()).group(1)).get("title")
            links.append(["#" + _anchor(doctree, node, "head-viewer"),
                          "Head viewer" + (f": {title}" if title else "")])
            continue
        section = node.parent
        while section is not None and not isinstance(section, nodes.section):
            section = section.parent
        if section not in groups:
            groups[section] = (len(links), [])
            links.append(["#" + _anchor(doctree, node, "answers"), ""])
        groups[section][1].append(_title_text(node))
    for section, (index, titles) in groups.items():
        links[index][1] = _answers_label(section, titles)
    doctree[CONTEXT_KEY] = [tuple(link) for link in links]
    show_under_title(doctree, links)


def show_under_title(doctree, links) -> None:
    """The page's links, visible to every reader, right under its title (its first section's)."""
    section = next(iter(doctree.findall(nodes.section)), None)
    if not links or section is None or not isinstance(section[0], nodes.title):
        return
    items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(label)}</a></li>' for href, label in links)
    section.insert(1, nodes.raw("", f'<nav class="course-interactive d-print-none" aria-label="Interactive on this '
                                    f'page"><span>Interactive on this page:</span> <ul>{items}</ul></nav>\n',
                                format="html"))


def add_to_context(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: hand the page's links to the template."""
    context[CONTEXT_KEY] = doctree.get(CONTEXT_KEY, []) if doctree is not None else []


def setup(app) -> None:
    app.connect("doctree-resolved", mark_targets)
    app.connect("html-page-context", add_to_context)
