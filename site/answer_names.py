"""Answers named after their question: a page of six toggles all named "Answer" tells a screen
reader or voice-control user nothing about which one is which.

A dropdown (sphinx-design, the quizzes' answers) that follows a paragraph opening with a bold
label ("**Quiz 2.** What is ...", "**Problem 1.** ...") is titled after it: "Answer to Quiz 2".
Code cells between the question and its answer do not count. Titles still shared on a page after
that are numbered ("Answer (2 of 3)"). The notebook export names them the same way
(:func:`notebook_export.answer_title`).
"""
from __future__ import annotations

from collections import Counter

from docutils import nodes


def _question(dropdown) -> str | None:
    """The bold label opening the paragraph before ``dropdown``, if any."""
    parent = dropdown.parent
    for sibling in reversed(parent.children[:parent.index(dropdown)]):
        if isinstance(sibling, (nodes.target, nodes.comment)) or sibling.get("nb_element") == "cell_code":
            continue            # a code cell computing the answer's numbers sits in between
        if not isinstance(sibling, nodes.paragraph):
            return None
        first = next((c for c in sibling.children if not (isinstance(c, nodes.Text) and not c.strip())), None)
        return first.astext().strip().rstrip(".:").strip() if isinstance(first, nodes.strong) else None
    return None


def name_answers(app, doctree) -> None:
    dropdowns = [n for n in doctree.findall(nodes.container)
                 if n.get("design_component") == "dropdown" and n.get("has_title")]
    for dropdown in dropdowns:
        title = dropdown[0]                        # a rubric holding the title's nodes
        label = _question(dropdown)
        if label:
            title += nodes.Text(f" to {label}")
    shared = Counter(d[0].astext() for d in dropdowns)
    seen = Counter()
    for dropdown in dropdowns:
        text = dropdown[0].astext()
        if shared[text] > 1:
            seen[text] += 1
            dropdown[0] += nodes.Text(f" ({seen[text]} of {shared[text]})")


def setup(app) -> None:
    app.connect("doctree-read", name_answers)
