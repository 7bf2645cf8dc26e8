"""Grade one submitted notebook: run it in the sandbox, judge what comes back, outside it.

The result is plain data (a dict), so that it can travel from any worker to the one process
that writes the gradebook. Every grade cell of the release gets a score and a message, whatever
the submission did: nothing here raises for a student's reason.
"""
import json
import time

from mha_checks import admission, judge as checks

from . import notebooks, sandbox

SIGNALS = {9: "it was killed (usually: it used more memory than the limit allows)",
           24: "it used more CPU time than the limit allows", 11: "it crashed (segmentation fault)",
           6: "it aborted", 25: "it wrote a file larger than the limit allows"}


def grade_notebook(release: notebooks.Release, nb: dict | None, reason: str, cases: dict,
                   limits: sandbox.Limits = sandbox.Limits(), unsafe: bool = False) -> dict:
    """{"tests": [{"id", "points", "score", "message", "mistake"}], "notes", "status", "seconds"}.

    ``cases``: {grade id: the hidden cases of that cell} (drawn from the secret by the caller, so
    that a worker needs no secret); ``reason``: why ``nb`` is None (not handed in, not JSON, ...).
    """
    start = time.monotonic()
    if nb is None:
        label = None if reason == "was not handed in" else "unreadable notebook"
        tests = [_result(g, False, f"Not graded: the file {release.name}.ipynb {reason}.", label)
                 for g in release.grade_cells]
        missing = reason == "was not handed in"
        return {"tests": tests, "notes": [] if missing else [f"{release.name}.ipynb {reason}"],
                "status": "missing" if missing else "unreadable", "seconds": 0.0}
    prog = notebooks.program(release, nb)
    refused = admission.refusals(prog.cells)  # the ready-made rule, decided here before anything runs
    runnable = [] if refused else release.grade_cells
    job = {"torch": any('"$tensor"' in json.dumps(c.specs()) or '"$mha"' in json.dumps(c.specs())
                        for g in runnable for c in cases[g.id]),
           "cells": prog.cells,
           "tests": [{"id": g.id, "cases": [{"function": c.function, "names": list(c.names), "specs": c.specs()}
                                            for c in cases[g.id]]} for g in runnable]}
    report = sandbox.run(job, limits, unsafe) if job["tests"] else sandbox.Report(returncode=0)
    events = _by_test(report.records)
    status = "graded"
    if job["tests"] and not report.records:
        status = "infra"  # the sandbox itself failed: retried, never recorded as the student's zero
    tests = []
    for g in release.grade_cells:
        verdict = (False, admission.explain(refused), "ready-made or forbidden code") if refused else \
            _judge_test(g, cases[g.id], events.get(g.id, {}), prog, report, limits)
        tests.append(_result(g, *verdict))
    notes = prog.notes + ([f"sandbox: {report.stderr.strip()[:500]}"] if status == "infra" else [])
    return {"tests": tests, "notes": notes, "status": status, "seconds": round(time.monotonic() - start, 3)}


def _result(g: notebooks.GradeCell, passed: bool, message: str, mistake: str | None) -> dict:
    return {"id": g.id, "points": g.points, "score": g.points if passed else 0.0,
            "message": message, "mistake": None if passed else mistake}


# --- what came back from the sandbox ----------------------------------------------------------

def _by_test(records: list) -> dict:
    events: dict = {}
    for r in records:
        test = r.get("test")
        if not isinstance(test, str):
            continue
        slot = events.setdefault(test, {"cases": {}, "cells": [], "status": None})
        if "case" in r and isinstance(r.get("outcome"), dict) and isinstance(r["case"], int):
            slot["cases"].setdefault(r["case"], r["outcome"])
        elif isinstance(r.get("cells"), list) and not slot["cells"]:
            slot["cells"] = [c for c in r["cells"] if isinstance(c, dict)]
        elif "status" in r and slot["status"] is None:
            slot["status"] = (str(r["status"]), r.get("detail"))
    return events


def _judge_test(g, cases: list, events: dict, prog, report, limits) -> tuple[bool, str, str | None]:
    if not cases:  # a course error, never a free point
        return False, "The grader has no hidden cases for this test; your instructor will grade it.", "no cases"
    for i, case in enumerate(cases):
        outcome = events.get("cases", {}).get(i)
        if outcome is None:
            return False, _no_outcome(events, report, limits), _no_outcome_label(events)
        if "missing" in outcome:
            return False, _missing(str(outcome["missing"]), events.get("cells", []), prog), "function not defined"
        try:
            verdict = checks.judge(case, outcome)
        except Exception as err:  # noqa: BLE001 - a judge bug must not end the batch
            return False, f"The grader could not judge this result ({type(err).__name__}); your instructor " \
                          "will look at it.", "judge error"
        if not verdict.passed:
            return False, verdict.message, verdict.mistake
    return True, "", None


def _no_outcome(events: dict, report, limits) -> str:
    status, detail = events.get("status") or (None, None)
    if status == "timeout":
        return (f"This test was stopped after {detail} s: your code took too long (an endless loop, "
                "or waiting for something that never comes?).")
    if status == "cells":
        return (f"Not run: your notebook's own cells did not finish within {detail} s (an endless loop "
                "outside any function, or a very slow cell?), so no test could call your function.")
    if status == "budget":
        return (f"Not run: the notebook's earlier tests used up its whole time budget ({detail} s), "
                "so this one had no time left.")
    if status == "signal":
        return f"This test's process stopped before it finished: {SIGNALS.get(detail, f'signal {detail}')}."
    if status == "exit":
        return (f"Your code ended this test's process (exit status {detail}: os._exit or similar) "
                "before the test finished.")
    if report.timed_out:
        return "The notebook's time ran out before this test finished."
    if report.truncated:
        return (f"Not read: your functions returned more data than the grader reads from one notebook "
                f"({sandbox.MAX_REPORT >> 20} MB in all, {sandbox.MAX_LINE >> 20} MB per result), so this "
                "test's result never arrived. Return arrays of the shapes the exercise asks for.")
    return "Your code ended this test before it returned a result."


def _no_outcome_label(events: dict) -> str:
    status = (events.get("status") or ("no result",))[0]
    return {"timeout": "timeout", "cells": "timeout", "budget": "notebook time budget", "signal": "crash", "exit": "process ended"}.get(
        status, "no result")


def _missing(function: str, failures: list, prog) -> str:
    for failure in failures:
        line = f" on line {failure['line']}" if failure.get("line") else ""
        if failure.get("type") in {"SyntaxError", "IndentationError", "TabError"}:
            return (f"The cell {failure.get('label')!r} does not compile: {failure.get('type')}{line} "
                    f"({failure.get('message')}), so {function} is not defined. Fix that line, then restart "
                    "and run all cells.")
    for failure in failures:
        line = f" on line {failure['line']}" if failure.get("line") else ""
        return (f"The cell {failure.get('label')!r} raised {failure.get('type')}{line} ({failure.get('message')}) "
                f"before {function} was defined.")
    if prog.missing:
        return (f"{function} is not defined: the notebook has no answer cell for it (was the cell deleted?). "
                "Write it in the cell under the exercise's prompt.")
    return f"{function} is not defined: write it in the answer cell (a function named exactly {function})."
