"""Answers whose time is the question: code that waits (sleeps, blocks on a read, stops itself, waits for a
process of its own), code that spins, and honest code that takes a good part of its time.

A test's limit is the student's own time (mha_grader/inside/harness.py's Clock): CPU time, and time the
code spent waiting by itself; what the machine takes (a busy CPU, a pause) is not counted. Each entry
says what grading must give it whatever the machine does. The ready-made rule admits no module that
sleeps or reads, so these are graded with the static rule off (``without_static_rule.py``), as
tests/test_fair_time.py and bench/bench_fair_time.py do. Points as in hostile.py: a notebook not listed
scores 0 (not handed in).
"""
from . import kit
from .hostile import Hostile, P, S, M, O, A

STOPPED = "stopped after"  # (the feedback of a test its own limit stopped)


def _answer(course, notebook, cell, code):
    return {notebook: kit.filled(course, notebook, {cell: code})}


def _when_tested(notebook: str, cell: str, wait: str, imports: str = "") -> str:
    """The right ``cell`` (a function of that name), doing ``wait`` first when a test calls it. The notebook's
    own try-it cells call it too (they run, the rule being off): those calls get the answer at once."""
    reference = kit.solution_cells(notebook)[cell].replace(f"def {cell}(", "def _right(", 1)
    return (f"import sys\n{imports}\n\n{reference}\n\ndef {cell}(*args, **kwargs):\n"
            "    if not sys._getframe(1).f_code.co_filename.startswith('<cell'):  # (a test's call)\n"
            + "".join(f"        {line}\n" for line in wait.splitlines()) + "    return _right(*args, **kwargs)\n")


def sleeps_in_its_function(course):
    """split_heads sleeps 1,000 s when a test calls it: each test is stopped at its own time limit."""
    return _answer(course, S, "split_heads", _when_tested(S, "split_heads", "time.sleep(1000)", "import time"))


def sleeps_in_a_loop(course):
    """merge_heads waits in a loop of short sleeps (a poll that never sees what it waits for)."""
    return _answer(course, M, "merge_heads",
                   _when_tested(M, "merge_heads", "while True:\n    time.sleep(0.01)", "import time"))


def blocks_on_a_read(course):
    """output_projection reads a pipe that nothing ever writes."""
    return _answer(course, O, "output_projection",
                   _when_tested(O, "output_projection", "r, w = os.pipe()\nos.read(r, 1)", "import os"))


def stops_itself(course):
    """project sends itself SIGSTOP: stopped by its own doing, it spends its own time."""
    return _answer(course, P, "project",
                   _when_tested(P, "project", "os.kill(os.getpid(), signal.SIGSTOP)", "import os, signal"))


def a_cell_that_sleeps(course):
    """A cell of the assembly notebook sleeps at the top level: no test can call the function."""
    reference = kit.solution_cells(A)["multi_head_attention"]
    return _answer(course, A, "multi_head_attention", "import time\n\ntime.sleep(1000)\n\n\n" + reference)


def waits_for_its_own_spinner(course):
    """split_heads forks a process that spins and waits for it: the job's CPU time (the cgroup counts every
    process) stops the test, not the waiting."""
    wait = "pid = os.fork()\nif pid == 0:\n    while True:\n        pass\nos.waitpid(pid, 0)"
    return _answer(course, S, "split_heads", _when_tested(S, "split_heads", wait, "import os"))


def leaves_a_sleeper_behind(course):
    """project is right, and leaves a process sleeping behind each call (killed before the next test)."""
    wait = "if os.fork() == 0:\n    time.sleep(1000)"
    return _answer(course, P, "project", _when_tested(P, "project", wait, "import os, time"))


def slow_but_within_its_time(course):
    """Right answers that take a good part of their time: a cell that computes for about a CPU second before the
    functions are defined, and calls that sleep a little. Full marks on any machine."""
    files = {}
    for notebook, cell in ((M, "merge_heads"), (O, "output_projection")):
        code = _when_tested(notebook, cell, "time.sleep(0.02)", "import time\n\n_warm = sum(i * i for i in range(20_000_000))")
        files.update(_answer(course, notebook, cell, code))
    return files


WAITING = [
    Hostile("w01_sleeps_in_its_function", sleeps_in_its_function, {S: 0}, {S: STOPPED}),
    Hostile("w02_sleeps_in_a_loop", sleeps_in_a_loop, {M: 0}, {M: STOPPED}),
    Hostile("w03_blocks_on_a_read", blocks_on_a_read, {O: 1}, {O: "stopped"}),  # (its per-head test calls another)
    Hostile("w04_stops_itself", stops_itself, {P: 1}, {P: "stopped"}),  # (fuse_heads is right)
    Hostile("w05_a_cell_that_sleeps", a_cell_that_sleeps, {A: 0}, {A: "did not finish"}),
    Hostile("w06_waits_for_its_own_spinner", waits_for_its_own_spinner, {S: 0}, {S: STOPPED}),
    Hostile("w07_leaves_a_sleeper_behind", leaves_a_sleeper_behind, {P: 3}),
    Hostile("w08_slow_but_within_its_time", slow_but_within_its_time, {M: 2, O: 3}),
]
