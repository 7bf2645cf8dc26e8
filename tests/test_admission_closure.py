"""The ready-made rule's world is closed, and the proof runs here against the pinned torch and NumPy:
the admitted names are what scripts/admitted_names.py makes of the installed libraries, and walking the
live object graph from everything they admit and from everything a notebook can define
(mha_checks/admission/walk.py, mha_checks/admission/shapes.py) reaches nothing forbidden, no notebook
class or trusted method as a value, and no object the rule mistakes for the student's own. The walk takes
about 30-80 s of CPU (~14,800 objects, ~153,000 calls on torch 2.13.0 / NumPy 2.4.6).

The walk's own checks: each of the holes it exists to see, opened again (a name admitted once more, a
piece of the rule undone in the walk's process only), is found with its path."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mha_checks.admission import admitted

REPO = Path(__file__).resolve().parents[1]
WALK = "mha_checks.admission.walk"  # (run as a module: python -m mha_checks.admission.walk)


def test_the_lists_are_generated_from_the_installed_libraries():
    assert (torch.__version__.split("+")[0], np.__version__) == (admitted.TORCH_VERSION, admitted.NUMPY_VERSION)
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "admitted_names.py"), "--check"],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]


def _walk(tmp_path, *args, undo: str = "") -> dict:
    """The walk's summary; ``undo``: Python run in the walk's process first (a piece of the rule undone)."""
    trace = tmp_path / "trace.txt"
    command = [sys.executable, "-m", WALK] if not undo else [
        sys.executable, "-c", f"import sys\n{undo}\nfrom mha_checks.admission import walk\nsys.argv[0] = 'walk'\n"
                              "sys.exit(walk.main())"]
    run = subprocess.run([*command, "--trace", str(trace), *args], capture_output=True, text=True, cwd=REPO,
                         timeout=900)
    if run.returncode < 0:  # a call crashed the process: that call is not memory-safe
        last = trace.read_text().splitlines()[-1:]
        raise AssertionError(f"the walk crashed (signal {-run.returncode}) at {last}: not memory-safe")
    assert run.returncode in (0, 1), run.stderr[-3000:]
    return json.loads(run.stdout)


def test_nothing_forbidden_is_reachable_from_what_the_rule_admits(tmp_path):
    result = _walk(tmp_path)
    print(f"\nwalked {result['objects']} objects, {result['calls']} calls, {result['seconds']} s; "
          f"the libraries' references to notebook classes and trusted functions: {result['holders']}")
    assert result["found"] == {}, result["found"]
    assert result["objects"] > 3000 and result["calls"] > 30000  # (the walk did walk)
    assert result["holders"].get("Field", [0, 0])[0] > 0  # (the shapes ran: dataclass fields hold classes)


def test_the_walk_finds_what_one_more_admitted_name_would_leak(tmp_path):
    """The check can fail: admitting `func_globals` (NumPy's Cython functions' module dictionaries, the
    gap of issue 25) is caught with its path."""
    result = _walk(tmp_path, "--admit", "func_globals", "--only", "numpy.random")
    assert any(path.endswith(".func_globals") for path in result["found"].values()), result


def test_the_walk_finds_read_only_memory_through_a_scalars_data(tmp_path):
    """`.data` admitted again: a NumPy scalar's memory, read-only underneath, is reachable (issue 36)."""
    result = _walk(tmp_path, "--admit", "data", "--only", "np.bytes_", "--only", "np.float64")
    assert any(why.startswith("memory that is read-only underneath") for why in result["found"]), result


UNDONE = {  # a piece of the rule undone -> (the roots to start from, what the walk must then find)
    "a class in a class read as a value (root B)": (
        "from mha_checks.admission import own, kinds\n"
        "own.OwnObjects._own_attribute = lambda self, attr, on_class=False: kinds.VALUE",
        ["classes: C1"], "a notebook class as a value (C1.Inner)"),
    "a dataclass field held as a value (root A)": (
        "import types\nfrom mha_checks.admission import calls, syntax\n"
        "calls.dataclasses = syntax.dataclasses = types.SimpleNamespace(field=object())",
        ["held defaults"], "a notebook class as a value (Own)"),
    "a dataclass built again with the fields it holds": (
        "from mha_checks.admission import own\nown.OwnObjects._rebuilt = lambda self, scope: False",
        ["forms: rebuilt", "dataclasses.replace"], "but it was tuple"),
}


@pytest.mark.parametrize("undone", sorted(UNDONE))
def test_the_walk_finds_each_hole_of_issue_36_by_itself(undone, tmp_path):
    """Each fix undone in the walk's process: the walk, started from the notebook shapes (it is told no
    route), finds the notebook class (or the foreign object handed to trusted code) with its path."""
    undo, only, found = UNDONE[undone]
    result = _walk(tmp_path, *[a for o in only for a in ("--only", o)], undo=undo)
    assert any(found in why for why in result["found"]), result["found"]
