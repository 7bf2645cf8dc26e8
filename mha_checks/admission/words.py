"""The refusal's words: what a student reads when the rule refuses code, and where it points.

A refusal names the cell (its label), the line in that cell, what was refused (the source itself, quoted
from the cell: :func:`lines`), why, and what to write instead. Each check's own sentence stands beside
the check, in the module that applies it; what they share is here: the ending of every refusal whose
reason is a ready-made answer (:data:`YOURSELF`), the reasons of the excluded families, quoted from the
generated ``admitted.FAMILIES`` (:func:`family`, :func:`family_text`), the one refusal of code too deep to
check (:data:`TOO_DEEP`), and how many refusals are kept (:data:`MOST`). The grader adds how the graded
function reaches the refused statement (``(reached by multi_head_attention → helper)``:
:meth:`Found.with_path`); a refused test's feedback is :func:`explain`.
"""
import re
from dataclasses import dataclass

from . import admitted

YOURSELF = "compute it yourself with @, F.linear, reshape/transpose, torch.softmax and masked_fill"
MOST = 20         # refusals kept per statement
TOO_DEEP = "the code is nested too deeply to be checked; write it in simpler statements."


@dataclass(frozen=True)
class Refusal:
    """One refused construct: the cell (its label), the line in that cell, and what to write instead."""
    cell: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"In the cell {self.cell!r}, line {self.line}: {self.text}"


class Found:
    """A refusal as found, before the path by which a test reaches it is known."""
    __slots__ = ("refusal",)

    def __init__(self, refusal: Refusal):
        self.refusal = refusal

    def with_path(self, path: str) -> Refusal:
        if not path:
            return self.refusal
        r = self.refusal
        return Refusal(r.cell, r.line, f"{r.text} (reached by {path})")


def explain(found: list, most: int = 3) -> str:
    """The feedback of a refused test: the first refusals, and how many more."""
    more = f" ({len(found) - most} more.)" if len(found) > most else ""
    return ("Not run: the code this test calls may not be graded as it stands. "
            + " ".join(str(r) for r in found[:most]) + more)


def family(where: str, name: str) -> str | None:
    """Why ``name`` (of the module ``where``, or of "values") is left out, if an excluded family holds it."""
    for fam, places in admitted.EXCLUDED.items():
        if name in places.get(where, ()):
            return admitted.FAMILIES[fam]
    return None


def family_text(attr: str) -> str:
    """Why a library base class's ``attr`` is not the student's to use (admitted.OWN_REFUSED), in words."""
    for fam, places in admitted.EXCLUDED.items():
        if attr in places.get("values", ()):
            return f"it {admitted.FAMILIES[fam]}"
    return "not maths"


def lines(source: str) -> list[str]:
    """The lines as the parser counts them (\\n, \\r\\n or \\r ends one; a form feed does not)."""
    return re.split(r"\r\n|\r|\n", source)
