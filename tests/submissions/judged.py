"""Grade a recipe at the judge level, fast: no nbgrader, no sandbox.

What the grader does, in-process: run the notebook's setup cell and the solution cells (the
reference answer, or a recipe's code), refuse a notebook the ready-made rule refuses, then for every
grade cell call the function on every one of the cell's hidden cases and judge the outcomes together
(the first failing case decides the cell; a mistake is named only if it reproduces every call). The
visible tests are the grade cells' own code, run in the same namespace.
"""
import json
import linecache
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_checks import admission, calling, hidden
from mha_checks.judge import judge_test
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


def namespace(notebook: str, answers: dict[str, str]) -> dict:
    """The notebook's names after its setup cell and its solution cells (answers override)."""
    ns: dict = {"__name__": "__main__"}
    exec(compile(setup_code(notebook), "<setup>", "exec"), ns)  # noqa: S102 - course code
    for cell, code in (reference_answers(notebook) | answers).items():
        filename = f"<cell {cell}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        try:
            exec(compile(code, filename, "exec"), ns)  # noqa: S102 - the recipe plays the student
        except Exception:  # noqa: BLE001 - a cell that does not run leaves its function undefined
            pass
    return ns


def hidden_results(notebook: str, answers: dict[str, str], seed: int = 2026) -> dict[str, CellResult]:
    """{grade cell: result} as the grader would record them (the ready-made rule first, then the judge)."""
    ns = namespace(notebook, answers)
    program = [{"label": "setup", "source": setup_code(notebook)}] + [
        {"label": cell, "source": code} for cell, code in (reference_answers(notebook) | answers).items()]
    refused = admission.refusals(program)
    rng = np.random.default_rng(seed)
    results, before = {}, []
    for gid, nb in hidden.GRADE_CELLS.items():
        if nb != notebook:
            continue
        cases = hidden.hidden_cases(gid, rng)
        fn = ns.get(cases[0].function)
        if refused:
            results[gid] = CellResult(False, admission.explain(refused), f"{cases[0].function}: ready-made answer")
        elif not callable(fn):
            results[gid] = CellResult(False, f"{cases[0].function} is not defined", "missing")
        else:  # every call runs, as in the sandbox; the test is judged on all of them
            verdict = judge_test(cases, [calling.call(fn, list(c.names), c.specs()) for c in cases], tuple(before))
            results[gid] = CellResult(verdict.passed, verdict.message, verdict.mistake)
            before += cases  # one process runs the notebook's tests in turn
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
