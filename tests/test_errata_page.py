"""The errata page gathers every Erratum and Note box of the chapters, as it says it does.

A box is an admonition headed "Erratum —" or "Note —" (read from the MyST sources, no build needed);
each needs a label right above it, and the chapter's list in chapters/errata/ must link to it.
"""
import re
from pathlib import Path

import pytest

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"
BOX = re.compile(r"^:{3,}\{admonition\} (?P<kind>Erratum|Note) —")
LABEL = re.compile(r"^\((?P<label>[\w-]+)\)=$")
REF = re.compile(r"\{ref\}`[^`<]*<(?P<label>[\w-]+)>`")
NAMED_REF = re.compile(r"\{ref\}`(?P<text>[^`<]*)<(?P<label>[\w-]+)>`")


def boxes(text, kinds=False):
    """(line number, label or None[, "Erratum" or "Note"]) of every Erratum/Note box."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        if box := BOX.match(line):
            above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            label = LABEL.match(above.strip())
            found.append((i + 1, label["label"] if label else None) + ((box["kind"],) if kinds else ()))
    return found


def test_boxes_finds_labelled_and_unlabelled_boxes():
    text = "(erratum-x)=\n:::{admonition} Erratum — a\n:::\n\n::::{admonition} Note — b\n::::\n"
    assert boxes(text) == [(2, "erratum-x"), (5, None)]


@pytest.mark.parametrize("chapter", sorted(CHAPTERS.glob("0*.md")), ids=lambda p: p.name)
def test_every_box_is_on_the_errata_page(chapter):
    listed = CHAPTERS / "errata" / chapter.name
    refs = set(REF.findall(listed.read_text(encoding="utf-8"))) if listed.exists() else set()
    missing = [f"chapters/{chapter.name}:{line}: " + (f"{label} is not listed in {listed.name}"
                                                      if label else "box without a label")
               for line, label in boxes(chapter.read_text(encoding="utf-8")) if label not in refs]
    assert not missing, "\n".join(missing)


def test_every_errata_entry_links_to_a_box():
    labels = {label for chapter in CHAPTERS.glob("0*.md")
              for _, label in boxes(chapter.read_text(encoding="utf-8"))}
    for listed in (CHAPTERS / "errata").glob("*.md"):
        unknown = [label for label in REF.findall(listed.read_text(encoding="utf-8"))
                   if label.startswith("erratum-") and label not in labels]
        assert not unknown, f"{listed.name}: {unknown}"


def test_a_link_that_names_a_box_kind_names_the_right_one():
    """A link written "erratum" must lead to a red Erratum box, "note" to a blue Note box."""
    kind = {label: k for chapter in CHAPTERS.glob("0*.md")
            for _, label, k in boxes(chapter.read_text(encoding="utf-8"), kinds=True)}
    wrong = [f"chapters/{chapter.name}: {m['text'].strip()!r} -> {m['label']} ({kind[m['label']]})"
             for chapter in CHAPTERS.glob("0*.md")
             for m in NAMED_REF.finditer(chapter.read_text(encoding="utf-8")) if m["label"] in kind
             for word in re.findall(r"\b(erratum|note)\b", m["text"].lower())
             if word != kind[m["label"]].lower()]
    assert not wrong, "\n".join(wrong)
