"""Grade a recipe at the judge level, fast: no nbgrader, no sandbox.

What the grader does, in-process: run the notebook's setup cell and the solution cells (the
reference answer, or a recipe's code) through the ready-made rule (a test whose functions reach refused
code scores 0; only what the graded functions reach runs), then for every
grade cell call the function on the cell's hidden cases and judge each outcome; the first failing
case decides the cell. The visible tests are the grade cells' own code, run in the same namespace.
"""
import json
import linecache
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_checks import admission, calling, hidden
from mha_checks.judge import judge
from mha_checks.visible import CheckFailed

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions" / "mha"


@dataclass(frozen=True)
class CellResult:
    passed: bool
    message: str = ""
    mistake: str | None = None


def _cells(notebook: str) -> list[dict]:
    return json.loads((SOLUTIONS / f"{notebook}.ipynb").read_text())["cells"]


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def setup_code(notebook: str) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(notebook) if _meta(c).get("grade_id", "").startswith("setup"))


def reference_answers(notebook: str) -> dict[str, str]:
    out = {}
    for c in _cells(notebook):
        if _meta(c).get("solution"):
            out[_meta(c)["grade_id"]] = "".join(
                line for line in "".join(c["source"]).splitlines(keepends=True) if "### " not in line)
    return out


def grade_cells(notebook: str) -> dict[str, str]:
    return {_meta(c)["grade_id"]: "".join(c["source"]) for c in _cells(notebook) if _meta(c).get("grade")}


def program(notebook: str, answers: dict[str, str]) -> list[dict]:
    """The notebook's cells as the grader reads them: its setup, then its solution cells (answers override)."""
    return [{"label": "setup", "source": setup_code(notebook)}] + [
        {"label": cell, "source": code} for cell, code in (reference_answers(notebook) | answers).items()]


def run_cells(cells: list[dict], ns: dict | None = None) -> dict:
    """Execute ``cells`` in order in one namespace (as the kernel or the sandbox would); a cell that
    raises leaves what it did not define undefined."""
    ns = {"__name__": "__main__"} if ns is None else ns
    for cell in cells:
        filename = f"<cell {cell['label']}>"
        linecache.cache[filename] = (len(cell["source"]), None, cell["source"].splitlines(keepends=True), filename)
        try:
            exec(compile(cell["source"], filename, "exec"), ns)  # noqa: S102 - the recipe plays the student
        except Exception:  # noqa: BLE001 - a cell that does not run leaves its function undefined
            pass
    return ns


def namespace(notebook: str, answers: dict[str, str]) -> dict:
    """The notebook's names after every one of its cells ran whole, as in the student's kernel (with
    IPython's ``In``, the cells it ran, which the visible tests read)."""
    cells = program(notebook, answers)
    return run_cells(cells, {"__name__": "__main__", "In": [""] + [c["source"] for c in cells]})


def hidden_results(notebook: str, answers: dict[str, str], seed: int = 2026) -> dict[str, CellResult]:
    """{grade cell: result} as the grader would record them: the ready-made rule first (a test whose
    functions reach refused code scores 0), then only the reached statements run, then the judge."""
    rng = np.random.default_rng(seed)
    cases = {gid: hidden.hidden_cases(gid, rng) for gid, nb in hidden.GRADE_CELLS.items() if nb == notebook}
    ruling = admission.admit(program(notebook, answers), {g: {c.function for c in cs} for g, cs in cases.items()},
                             trusted=1)
    ns = run_cells(ruling.cells)
    results = {}
    for gid in cases:
        results[gid] = CellResult(True)
        for case in cases[gid]:
            if gid in ruling.refused:
                results[gid] = CellResult(False, admission.explain(ruling.refused[gid]),
                                          f"{case.function}: ready-made answer")
                break
            fn = ns.get(case.function)
            if not callable(fn):
                results[gid] = CellResult(False, f"{case.function} is not defined", "missing")
                break
            verdict = judge(case, calling.call(fn, list(case.names), case.specs()))
            if not verdict.passed:
                results[gid] = CellResult(False, verdict.message, verdict.mistake)
                break
    return results


def visible_results(notebook: str, answers: dict[str, str]) -> dict[str, CellResult]:
    """{grade cell: result} of the grade cells' own (visible) code, run in the notebook's namespace."""
    ns = namespace(notebook, answers)
    out = {}
    for gid, code in grade_cells(notebook).items():
        try:
            exec(compile(code, f"<grade {gid}>", "exec"), ns)  # noqa: S102
            out[gid] = CellResult(True)
        except CheckFailed as err:
            out[gid] = CellResult(False, str(err))
        except Exception as err:  # noqa: BLE001
            out[gid] = CellResult(False, f"{type(err).__name__}: {err}")
    return out
