"""Grade one submitted notebook: run it in the sandbox, judge what comes back, outside it.

The result is plain data (a dict), so that it can travel from any worker to the one process
that writes the gradebook. Every grade cell of the release gets a score and a message, whatever
the submission did: nothing here raises for a student's reason.
"""
import json
import time

from mha_checks import admission, judge as checks

from ..walls import sandbox
from . import frames, notebooks

TIME_STOPS = {"timeout", "cells", "budget", "spent", "wall"}  # the statuses of a test stopped (or not run) for time
SIGNALS = {9: "it was killed (usually: it used more memory than the limit allows)",
           24: "it used more CPU time than the limit allows", 11: "it crashed (segmentation fault)",
           6: "it aborted", 25: "it wrote a file larger than the limit allows"}
COMPILE_ERRORS = {"SyntaxError", "IndentationError", "TabError"}
EPSILON_S = 0.01  # (the seconds a record gives are rounded to the millisecond)
UNREADABLE, UNGRADABLE, JUDGE_ERROR, NO_CASES = "unreadable notebook", "could not be graded", "judge error", "no cases"
NOT_MISTAKES = frozenset({UNREADABLE, UNGRADABLE, JUDGE_ERROR, NO_CASES})  # labels of tests not graded: no mistake


def grade_notebook(release: notebooks.Release, nb: dict | None, reason: str, cases: dict,
                   limits: sandbox.Limits = sandbox.Limits(), unsafe: bool = False) -> dict:
    """{"tests": [{"id", "points", "score", "message", "mistake"}], "notes", "status", "seconds", "sandbox_s"}.

    ``cases``: {grade id: the hidden cases of that cell} (drawn from the secret by the caller, so
    that a worker needs no secret); ``reason``: why ``nb`` is None (not handed in, not JSON, ...).
    status: "graded"; "missing" or "unreadable" (no notebook to run); "ungradable" (its records were
    outside the schema, or the grader failed on it: every test 0, one sentence why); "infra" (the
    sandbox returned nothing: the caller retries); "machine" (a time limit stopped a test before the
    student's code had spent that time: the machine's doing, never the student's verdict; the caller
    retries). "seconds": what grading it took here, a wait for a sandbox's turn left out; "sandbox_s":
    what its sandbox took of that.
    """
    start = time.monotonic()
    if nb is None:
        label = None if reason == "was not handed in" else UNREADABLE
        tests = [_result(g, False, f"Not graded: the file {release.name}.ipynb {reason}.", label)
                 for g in release.grade_cells]
        missing = reason == "was not handed in"
        return {"tests": tests, "notes": [] if missing else [f"{release.name}.ipynb {reason}"],
                "status": "missing" if missing else "unreadable", "seconds": 0.0, "sandbox_s": 0.0}
    try:
        prog, ruling, job = plan(release, nb, cases)
    except Exception as err:  # noqa: BLE001 - a notebook that breaks the static checks is that notebook's problem
        return _ungradable(release, err, start)
    report = sandbox.run(job, limits, unsafe) if job["tests"] \
        else sandbox.Report(returncode=0)
    start += report.waited
    timing = {"sandbox_s": round(report.seconds, 3)}
    if job["tests"] and (not report.records or report.returncode == sandbox.HARNESS_FAILED):
        # the sandbox or the harness itself failed (student code runs only in the harness's children,
        # which never return into it): retried, never the student's zero
        return {"tests": [_result(g, False, "Not graded yet: the sandbox failed.", None) for g in release.grade_cells],
                "notes": [f"sandbox: {frames.text(report.stderr.strip(), 500)}"], "status": "infra",
                "seconds": round(time.monotonic() - start, 3), **timing}
    try:
        events = frames.events(report.records, job)
        if report.garbage and not report.truncated:  # (a line cut at the size limit leaves its tail)
            raise frames.Invalid(f"the job sent {report.garbage} line(s) that are not records")
        machine = _the_machines(events, report, limits)
        if machine:  # never the student's verdict: tried again (execute.attempt), never stamped
            return {"tests": [_result(g, False, "Not graded yet: the machine held its job back.", None)
                              for g in release.grade_cells], "notes": [machine], "status": "machine",
                    "seconds": round(time.monotonic() - start, 3), **timing}
        tests = _judge_all(release, cases, ruling, prog, events, report, limits)
    except Exception as err:  # noqa: BLE001 - whatever one notebook's results hold, the run goes on
        return {**_ungradable(release, err, start), **timing}
    return {"tests": tests, "notes": prog.notes, "status": "graded", "seconds": round(time.monotonic() - start, 3),
            **timing}


def _ungradable(release: notebooks.Release, err: Exception, start: float) -> dict:
    """Every test of the notebook at 0, with one sentence: what was wrong (a record outside the
    schema, a bound exceeded) or that the grader failed on it."""
    reason = str(err) if isinstance(err, frames.Invalid) else \
        f"the grader failed on this notebook ({type(err).__name__}); your instructor will look at it"
    tests = [_result(g, False, f"Could not be graded: {reason}.", UNGRADABLE) for g in release.grade_cells]
    return {"tests": tests, "notes": [f"{release.name}.ipynb could not be graded: {reason}"],
            "status": "ungradable", "seconds": round(time.monotonic() - start, 3), "sandbox_s": 0.0}


def plan(release: notebooks.Release, nb: dict, cases: dict) -> tuple:
    """(program, ruling, job): the ready-made rule, decided here before anything runs (what each test's
    functions reach, and only that, runs; a test whose functions reach refused code is not run), and
    the sandbox's job for the tests that run."""
    prog = notebooks.program(release, nb)
    calls = {g.id: {c.function for c in cases.get(g.id, [])} for g in release.grade_cells}
    ruling = admission.admit(prog.cells, calls, trusted=len(release.setup))
    prog.cells = ruling.cells
    return prog, ruling, _job(prog, [g for g in release.grade_cells if g.id not in ruling.refused], cases)


def _job(prog: notebooks.Program, runnable: list, cases: dict) -> dict:
    """The sandbox's job: the cells, and each case's function, argument names and inputs (sandbox.run
    keeps the inputs outside and hands each to the harness only when its call is made)."""
    tests = [{"id": g.id, "cases": [{"function": c.function, "names": list(c.names), "specs": c.specs()}
                                    for c in cases[g.id]]} for g in runnable]
    texts = (json.dumps(c["specs"]) for t in tests for c in t["cases"])  # (made one at a time, as any() asks)
    torch = any('"$tensor"' in text or '"$mha"' in text for text in texts)
    return {"torch": torch, "cells": prog.cells, "tests": tests}


def _the_machines(events: dict, report, limits: sandbox.Limits) -> str | None:
    """Why the job's time was the machine's, not the student's (None: every time limit that stopped a test
    was reached by the student's own code): the grader's wall-clock backstop ended the job, or a test was
    stopped (or not run) for time while the seconds it reports spent (read by the job's pid 1 from the
    cgroup's count and the kernel's run-queue accounting: inside/harness.py's Clock) fall short of the
    limit that stopped it (the harness's own backstop, "wall", among them)."""
    if report.timed_out:
        return (f"the machine held its job back: it did not end within {limits.wall_s():g} s of wall-clock time "
                "(the machine or the grader was paused or overloaded)")
    for test, found in events.items():
        status, _ = found.get("status") or (None, None)
        spent = found.get("time") or {}
        if status not in TIME_STOPS:
            continue
        if status in ("timeout", "cells"):
            theirs = spent["cpu"] >= limits.test_cpu_s - EPSILON_S or spent["own"] >= limits.test_s - EPSILON_S
        else:
            theirs = max(spent["notebook_cpu"], spent["notebook_own"]) >= limits.notebook_s - EPSILON_S \
                and status != "wall"
        if not theirs:
            return (f"the machine held its job back: {frames.text(test, 60)} was stopped after {spent['wall']:.0f} s "
                    f"of wall-clock time, when its code had used {spent['cpu']:.1f} s of CPU time and "
                    f"{spent['own']:.1f} s of its own (the machine was busy or paused)")
    return None


def _judge_all(release, cases, ruling, prog, events: dict, report, limits) -> list[dict]:
    tests, before = [], []  # before: the cases the current child called (what state it may hold)
    for g in release.grade_cells:
        found = ruling.refused.get(g.id)
        if found:  # never sent to the sandbox: the child goes on to the next test as it was
            tests.append(_result(g, False, admission.explain(found), f"{_function(cases[g.id], g)}: ready-made or "
                                                                       "forbidden code"))
            continue
        test = events.get(g.id, {})
        tests.append(_result(g, *_judge_test(g, cases[g.id], test, prog, report, limits, tuple(before))))
        before += [c for i, c in enumerate(cases[g.id]) if i in test.get("cases", {})]
        if (test.get("status") or (None,))[0] != "done":  # the child ended: the next test's starts afresh
            before = []
    return tests


def _result(g: notebooks.GradeCell, passed: bool, message: str, mistake: str | None) -> dict:
    return {"id": g.id, "points": g.points, "score": g.points if passed else 0.0,
            "message": message, "mistake": None if passed else mistake}


# --- what came back from the sandbox ----------------------------------------------------------

def _judge_test(g, cases: list, events: dict, prog, report, limits, before: tuple = ()) \
        -> tuple[bool, str, str | None]:
    if not cases:  # a course error, never a free point
        return False, "The grader has no hidden cases for this test; your instructor will grade it.", NO_CASES
    outcomes = [events.get("cases", {}).get(i) for i in range(len(cases))]
    ran = next((i for i, o in enumerate(outcomes) if o is None or "missing" in o), len(cases))
    try:  # the calls that ran, judged together: a mistake is named only if it reproduces every one of them
        verdict = checks.judge_test(cases[:ran], outcomes[:ran], before) if ran else checks.PASSED
    except Exception as err:  # noqa: BLE001 - a judge bug must not end the batch
        return False, f"The grader could not judge this result ({type(err).__name__}); your instructor " \
                      "will look at it.", JUDGE_ERROR
    if not verdict.passed:
        return False, verdict.message, verdict.mistake
    if ran < len(cases) and outcomes[ran] is None:
        return False, _no_outcome(events, report, limits), _no_outcome_label(events, cases[ran].function)
    if ran < len(cases):
        function, cells = str(outcomes[ran]["missing"]), events.get("cells", [])
        return False, _missing(function, cells, prog), _missing_label(function, cells, prog)
    return True, "", None


def _no_outcome(events: dict, report, limits) -> str:
    """Why a test has no outcome, in one sentence. A time limit is named by its value (limits), the same
    whatever the machine: only a limit the student's code reached gets here (_the_machines)."""
    status, detail = events.get("status") or (None, None)
    seconds = f"{detail:g}" if isinstance(detail, int | float) else None  # (seconds or MB; may be absent: never "None")
    if status == "timeout":
        return (f"This test was stopped after {limits.test_s:g} s: your code took too long (an endless loop, "
                "or waiting for something that never comes?).")
    if status == "spent":
        return (f"This test was stopped when the notebook's time budget ({limits.notebook_s:g} s) ran out: your "
                "code took too long (an endless loop, or waiting for something that never comes?).")
    if status == "cells":
        return (f"Not run: your notebook's own cells did not finish within {limits.test_s:g} s (an endless loop "
                "outside any function, or a very slow cell?), so no test could call your function.")
    if status == "large":
        return (f"Not read: your function returned more data than the grader reads from one call"
                f"{f' ({seconds} MB)' if seconds else ''}. Return arrays of the shapes the exercise asks for.")
    if status == "budget":
        return (f"Not run: the notebook's earlier tests used up its whole time budget ({limits.notebook_s:g} s), "
                "so this one had no time left.")
    memory = (f"it used more memory than the limit allows ({limits.memory >> 20} MB for all the processes "
              "of your notebook together)")
    if status == "signal":
        why = memory if detail == 9 and report.usage.get("oom_kills") else SIGNALS.get(
            detail, f"it was stopped by signal {detail}" if isinstance(detail, int) else "it was stopped by a signal")
        return f"This test's process stopped before it finished: {why}."
    if status == "exit" and isinstance(detail, int):
        return (f"Your code ended this test's process (exit status {detail}: os._exit or similar) "
                "before the test finished.")
    if status == "exit":  # (no status: the process went without one, or the test's inputs never came)
        return "This test's process ended before the test finished" + (f" ({detail})." if detail else ".")
    if report.truncated:
        return (f"Not read: your functions returned more data than the grader reads from one notebook "
                f"({sandbox.MAX_REPORT >> 20} MB in all, {sandbox.MAX_LINE >> 20} MB per result), so this "
                "test's result never arrived. Return arrays of the shapes the exercise asks for.")
    if report.usage.get("oom_kills"):
        return f"This test never finished: {memory}."
    return "Your code ended this test before it returned a result."


def _no_outcome_label(events: dict, function: str) -> str:
    """The label of a call that gave no outcome: the function it called, and what stopped it."""
    status = (events.get("status") or ("no result",))[0]
    return f"{function}: " + {
        "timeout": "too slow (stopped at the time limit)", "cells": "not run (the notebook's own cells did not finish)",
        "budget": "not run (the notebook's time ran out)",
        "spent": "too slow (stopped when the notebook's time ran out)", "signal": "its process crashed or was killed",
        "exit": "it ended its process", "large": "returned more data than the grader reads"}.get(status, "no result")


def _function(cases: list, g) -> str:
    """The function a test calls (its grade id when it has no case)."""
    return cases[0].function if cases else g.id


def _missing_label(function: str, failures: list, prog) -> str:
    """The mistake's label for a function that is not defined: its cause, as _missing says it in full."""
    compiled = [f for f in failures if f.get("type") in COMPILE_ERRORS]
    if compiled:
        return f"{function}: its cell does not compile ({frames.text(str(compiled[0].get('type')), 40)})"
    if failures:
        return f"{function}: a cell raised {frames.text(str(failures[0].get('type')), 40)} before it was defined"
    return f"{function}: no answer cell" if prog.missing else f"{function}: not defined (no function of that name)"


def _missing(function: str, failures: list, prog) -> str:
    for failure in failures:
        line = f" on line {failure['line']}" if failure.get("line") else ""
        if failure.get("type") in COMPILE_ERRORS:
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
