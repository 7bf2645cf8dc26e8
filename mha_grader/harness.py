"""The grader's program inside the sandbox: run a notebook's cells, call the graded functions.

It runs as an unprivileged user in fresh namespaces (see sandbox.py), reads /job/job.json and
writes one JSON line per event to the file descriptor named by its argument:

  {"test": id, "case": i, "outcome": {...}}   what calling.call returned (plain data)
  {"test": id, "cells": [{"label", "type", "message", "line"}]}   cells that raised
  {"test": id, "status": "done" | "timeout" | "signal" | "exit" | "budget" | "cells", "detail": ...}

("cells": the notebook's own cells did not finish within a test's time, so this test and every
later one cannot run; "budget": not run, the notebook's time is spent.)

Every test runs in a child forked from this process, which itself never runs student code: the
child executes the cells in a fresh namespace, then calls the cases; a crash, a hang or a
memory blow-up ends that child only. After each child, every other process of the sandbox user
is killed, so nothing the student's code started outlives its test. Nothing here decides a
grade: the judge, outside, compares the outcomes with the reference.
"""
import ctypes
import json
import os
import resource
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calling  # noqa: E402 - copied next to this file into the job folder

OUT = int(sys.argv[1]) if len(sys.argv) > 1 else 3
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.json")) as _fh:
    JOB = json.load(_fh)
CELLS_DONE = "/tmp/.cells-done" if JOB.get("own_namespace") else None  # a marker: the cells ran to the end


def emit(record: dict) -> None:
    os.write(OUT, (json.dumps(record) + "\n").encode())


def run_cells(cells: list[dict]) -> tuple[dict, list[dict]]:
    """Execute the cells in order in a fresh namespace; a cell that raises is reported, not fatal."""
    namespace: dict = {"__name__": "__main__"}
    failures = []
    for cell in cells:
        try:
            exec(compile(cell["source"], f"<cell {cell['label']}>", "exec"), namespace)
        except BaseException as err:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are the student's too
            failures.append({"label": cell["label"], **calling.describe_error(err)})
    return namespace, failures


def child(job: dict, test: dict) -> None:
    """In the forked child: limits, quiet output, the cells, then each case."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    cpu = int(job["limits"]["test_cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    namespace, failures = run_cells(job["cells"])
    if CELLS_DONE:
        open(CELLS_DONE, "w").close()
    if failures:
        emit({"test": test["id"], "cells": failures})
    for i, case in enumerate(test["cases"]):
        fn = namespace.get(case["function"])
        if not callable(fn):
            outcome = {"missing": case["function"]}
        else:
            outcome = calling.call(fn, case["names"], case["specs"])
        emit({"test": test["id"], "case": i, "outcome": outcome})


def wait(pid: int, seconds: float) -> tuple[str, object]:
    """Wait for the child at most ``seconds``: ("done"|"exit"|"signal"|"timeout", detail)."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], max(seconds, 0.0))
    finally:
        os.close(fd)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "timeout", round(seconds, 1)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "signal", os.WTERMSIG(status)
    code = os.WEXITSTATUS(status)
    return ("done", 0) if code == 0 else ("exit", code)


def kill_the_rest() -> None:
    """Kill every other process of this user (what a test left running); this one survives.

    Only in the sandbox's own PID namespace: anywhere else, kill(-1) would reach every process of
    the user running it (the unsafe mode runs without a namespace)."""
    if not JOB.get("own_namespace"):
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:  # reap them
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def main() -> None:
    job = JOB
    ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of a test come back here to be reaped
    if job.get("torch"):
        import torch  # imported once here, inherited by every forked test
        torch.set_num_threads(1)
    deadline = time.monotonic() + job["limits"]["notebook_s"]
    stuck = None  # the cells themselves never finished: every later test would hang the same way
    for test in job["tests"]:
        left = deadline - time.monotonic()
        if stuck or left <= 0:
            emit({"test": test["id"], "status": "cells" if stuck else "budget",
                  "detail": stuck or job["limits"]["notebook_s"]})
            continue
        if CELLS_DONE and os.path.exists(CELLS_DONE):
            os.unlink(CELLS_DONE)
        pid = os.fork()
        if pid == 0:
            try:
                child(job, test)
            finally:
                os._exit(0)
        status, detail = wait(pid, min(job["limits"]["test_s"], left))
        kill_the_rest()
        if status == "timeout" and CELLS_DONE and not os.path.exists(CELLS_DONE):
            status = "cells"
            stuck = detail
        emit({"test": test["id"], "status": status, "detail": detail})


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    main()
