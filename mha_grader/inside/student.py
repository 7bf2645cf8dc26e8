"""What runs as the student: the child that the job's pid 1 (harness.py) forks to run the cells and the calls.

The child is the only process of a job that runs student code. Before any of it runs, it closes the
report channel (a socket: it cannot be opened again through /proc) and the cgroup's CPU count, becomes the
student (as_student.py: the student's uid, no capabilities), sends its output to /dev/null, takes a CPU
limit (a guard above the time pid 1 allows), and seeds
Python's, NumPy's and torch's generators from the job (the same numbers at every grading of a
submission). Then it runs the cells once and calls the cases it is sent, one after another, on views of
the memory it shares with pid 1, and answers each with one line on its own pipe: a value the function
returned, or the error it raised, as plain data (an outcome that JSON cannot hold is sent as that
fact). What pid 1 reads of it, and what each way it ends costs, is harness.py's.

Copied into /job next to harness.py and imported by file (``import student``), as as_student.py and
mha_checks/calling.py are; the fork server has it loaded already.
"""
import ctypes
import json
import math
import os
import random
import resource
import sys

import numpy as np

import as_student  # (by file: in /job, or already loaded by the fork server)
import calling

PR_SET_NAME = 15
LIBC = ctypes.CDLL(None, use_errno=True)
UNDESCRIBED = {"type": "an exception", "message": "(it cannot be shown: turning it into text raised another error)",
               "line": None}
UNSENDABLE = {"type": "an outcome", "message": "(it cannot be sent: turning it into data raised an error)",
              "line": None}


def main(job: dict, held: list[int], shared: calling.Layout, requests: int, answers: int) -> None:
    """In the forked child: close what pid 1 ``held`` (the report channel, the cgroup's CPU count), become
    the student, limits, quiet output, seeded random generators, the cells, then each case it is sent on
    ``requests``, each answered on ``answers``."""
    for fd in held:
        os.close(fd)
    LIBC.prctl(PR_SET_NAME, b"mha-student", 0, 0, 0)
    as_student.become(job.get("student"))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    limits = job["limits"]  # (a guard: pid 1 stops each test at its CPU time, and the notebook at its own, first)
    cpu = math.ceil(limits["notebook_s"] + limits["test_cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    seed_generators(job.get("seed", 0))
    namespace, failures = run_cells(job["cells"])
    send(answers, {"cells": failures, "seq": 0})
    incoming = os.fdopen(requests, "rb")
    for line in incoming:
        case = json.loads(line)
        fn = namespace.get(case["function"])
        if not callable(fn):
            outcome = {"missing": case["function"]}
        else:
            try:
                outcome = calling.invoke(fn, case["names"], case["specs"], shared.view)
            except BaseException:  # noqa: BLE001 - describing the student's error raised (its __str__, say)
                outcome = {"error": UNDESCRIBED}
        send(answers, {**outcome, "seq": case["seq"]}, instead={"error": UNSENDABLE, "seq": case["seq"]})


def seed_generators(seed: int) -> None:
    """Python's, NumPy's and torch's random generators, seeded from the job (walls/sandbox._seed): a submission
    that draws random numbers (dropout, say) draws the same ones each time it is graded. (A generator
    made without a seed, as numpy's default_rng(), and os.urandom still draw from the kernel; torch,
    if the cells import it here, starts from its own fixed seed.)"""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].default_generator.manual_seed(seed)  # (the CPU's: no device is asked, as manual_seed does)


def run_cells(cells: list[dict]) -> tuple[dict, list[dict]]:
    """Execute the cells in order in a fresh namespace; a cell that raises is reported, not fatal."""
    namespace: dict = {"__name__": "__main__"}
    failures = []
    for cell in cells:
        try:
            exec(compile(cell["source"], f"<cell {cell['label']}>", "exec"), namespace)
        except BaseException as err:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are the student's too
            failures.append({"label": cell["label"], **described(err)})
    return namespace, failures


def described(err: BaseException) -> dict:
    """calling.describe_error(err) as plain text and a number, or UNDESCRIBED where describing it raises
    or gives anything else (its __str__ may return a str subclass, its __traceback__ be a property...)."""
    try:
        found = calling.describe_error(err)
        kind, message, line = found["type"], found["message"], found["line"]
        if type(kind) is str and type(message) is str and (line is None or type(line) is int):
            return {"type": kind, "message": message, "line": line}
    except BaseException:  # noqa: BLE001 - whatever the student's exception does when described
        pass
    return dict(UNDESCRIBED)


def send(fd: int, frame: dict, instead: dict | None = None) -> None:
    """``frame`` as one line on ``fd``; ``instead``, if turning ``frame`` into JSON raises."""
    try:
        data = (json.dumps(frame) + "\n").encode()
    except BaseException:  # noqa: BLE001 - a value of the student's that JSON cannot hold, or that raises
        if instead is None:
            raise
        data = (json.dumps(instead) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]
