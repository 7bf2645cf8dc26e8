"""Hostile submissions: what a student (or a broken tool) can hand in besides honest code.

Each entry builds one student's files from the course's notebooks. They are graded in one batch
with two honest students around them (first and last in nbgrader's order), and the test records
what nbgrader 0.9.6 does with each: the score, and where the instructor reads the reason.
Sandboxing, tamper-proofing and crash-fair partial credit are later work: where stock nbgrader
is unfair here (a crash loses every notebook; a monkeypatch wins full marks), the test pins that
behaviour down so the later change is made knowingly.
"""

from . import kit
from .mutants import MUTANTS

S, P, M, O = "02_split_heads", "01_project", "03_merge_heads", "04_output_projection"
WRONG_SPLIT = next(m for m in MUTANTS if m.student == "m06_split_no_transpose")


def _wrong_split(course):
    ref = kit.solution_cells(S)["split_heads"]
    return kit.filled(course, S, {"split_heads": WRONG_SPLIT.answer(ref)})


def _grade_cells(nb):
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]


def edited_locked_cells(course):
    """A wrong split_heads, both test cells replaced by `pass`, the read-only setup cell edited."""
    nb = _wrong_split(course)
    for cell in _grade_cells(nb):
        cell["source"] = "pass  # tests? what tests?\n"
    setup = next(c for c in nb["cells"] if kit.grade_id(c) == "setup_02")
    setup["source"] = "import numpy as np\nprint('edited')\n"
    return {S: nb}


def deleted_test_cells(course):
    """A correct split_heads whose two test cells were deleted."""
    nb = kit.filled(course, S)
    nb["cells"] = [c for c in nb["cells"] if c not in _grade_cells(nb)]
    return {S: nb}


def stripped_test_metadata(course):
    """A correct merge_heads; its test cells lost their nbgrader metadata and say `pass`."""
    nb = kit.filled(course, M)
    for cell in _grade_cells(nb):
        cell["metadata"] = {}
        cell["source"] = "pass\n"
    return {M: nb}


def stripped_all_metadata(course):
    """A correct project notebook saved by a tool that drops every cell's metadata."""
    nb = kit.filled(course, P)
    for cell in nb["cells"]:
        cell["metadata"] = {}
    return {P: nb}


def broken_schema_version(course):
    """A correct split_heads; its test cells' nbgrader schema_version was deleted (an old or buggy tool)."""
    nb = kit.filled(course, S)
    for cell in _grade_cells(nb):
        del cell["metadata"]["nbgrader"]["schema_version"]
    return {S: nb}


def infinite_loop(course):
    """A correct project notebook, then a split_heads cell that never ends."""
    nb = kit.filled(course, S, {"split_heads": "while True:\n    pass\n"})
    return {P: kit.filled(course, P), S: nb}


def swallowed_interrupt(course):
    """A correct project notebook, then a merge_heads cell that ignores KeyboardInterrupt."""
    loop = ("import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
            "    except KeyboardInterrupt:\n        pass\n")
    return {P: kit.filled(course, P), M: kit.filled(course, M, {"merge_heads": loop})}


def os_exit(course):
    """A correct project notebook, then an output projection cell that kills its own kernel."""
    return {P: kit.filled(course, P), O: kit.filled(course, O, {"output_projection": "import os\nos._exit(0)\n"})}


def invalid_json(course):
    """A correct project notebook, and a split_heads notebook that is not JSON at all."""
    return {P: kit.filled(course, P), S: b'{"cells": [ this is not JSON'}


def huge_output(course):
    """A correct project notebook whose try-it cell prints one 100 MB line."""
    nb = kit.filled(course, P)
    cell = next(c for c in nb["cells"] if c.get("id") == "try_project")
    cell["source"] = "print('x' * 100_000_000)\n"
    return {P: nb}


def monkeypatched_checks(course):
    """A wrong split_heads that also switches off the assertion helper the tests call."""
    nb = _wrong_split(course)
    sol = next(c for c in nb["cells"] if kit.grade_id(c) == "split_heads")
    sol["source"] += "\nimport mha_lib.grading as _g\n_g.compare = lambda *args, **kwargs: None\n"
    return {S: nb}


def honest(course):
    """Every notebook, correctly solved."""
    return {n: kit.filled(course, n) for n in kit.NOTEBOOKS}


def honest_two(course):
    """Two notebooks (NumPy and PyTorch), correctly solved."""
    return {n: kit.filled(course, n) for n in (P, "05_assembly")}


HOSTILE = {
    "h00_honest_first": honest_two,
    "h01_edited_locked_cells": edited_locked_cells,
    "h02_deleted_test_cells": deleted_test_cells,
    "h03_stripped_test_metadata": stripped_test_metadata,
    "h04_stripped_all_metadata": stripped_all_metadata,
    "h05_broken_schema_version": broken_schema_version,
    "h06_infinite_loop": infinite_loop,
    "h07_swallowed_interrupt": swallowed_interrupt,
    "h08_os_exit": os_exit,
    "h09_invalid_json": invalid_json,
    "h10_huge_output": huge_output,
    "h11_monkeypatched_checks": monkeypatched_checks,
    "h99_honest_last": honest,
}
