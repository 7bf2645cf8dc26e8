"""The grader's program inside the sandbox: run a notebook's cells, call the graded functions.

It runs as an unprivileged user in fresh namespaces (see sandbox.py). /job/job.json holds the
cells and, per test, which function each case calls (names, never inputs). The report channel
(the descriptor named by its argument, a socket) carries one JSON line per event out:

  {"harness": "started"}                          before any student code exists
  {"ask": [t, i]}                                 the inputs of test t's case i, please (answered on
                                                  the same socket with one line {"specs": [...]})
  {"test": id, "case": i, "outcome": {...}}       the call's outcome (plain data)
  {"test": id, "cells": [{"label", "type", "message", "line"}]}   cells that raised
  {"test": id, "status": "done" | "timeout" | "signal" | "exit" | "budget" | "cells" | "large",
   "detail": ...}

("cells": the notebook's own cells did not finish within a test's time, so this test and every
later one cannot run; "budget": not run, the notebook's time is spent; "large": the call's
result was larger than a record may be.)

Two processes, and only one of them ever runs student code:

  harness (this process)  holds the report channel; never runs student code, and is not dumpable,
                          so no process of the sandbox user can read or write its memory
                          (/proc/PID/mem, process_vm_writev); asks for each case's inputs just
                          before the call, keeps a private copy, and lays the arrays out in
                          memory it shares with the child
  child (forked)          closes the channel first (a socket: it cannot be opened again through
                          /proc), runs the cells once, then calls the cases of one test after
                          another, as the notebook's kernel runs its tests, on views of the shared
                          memory, and sends each outcome back on a pipe of its own

The child's frames are data: a value the function returned, or the error it raised. Whether the
call changed its arguments in place is observed here, by comparing the shared memory with the
private copy after the child answers: the child cannot hide a change it made. Nothing else a
function receives can be changed in place (a list argument, mha, an array's shape: see
calling.build_argument; an attempt raises in the child, and costs the test), so nothing the child
says about its arguments is read. A crash, a hang, a memory blow-up or an exit
ends the child and costs the test it happened in: every other process of the sandbox user is then
killed, and the next test gets a new child, which runs the cells again. Nothing here decides a
grade: the judge, outside, validates every record and compares with the reference.
"""
import ctypes
import json
import mmap
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
MAX_FRAME = 6 * 1024 * 1024   # the largest outcome a child may send (the grader reads 8 MB per line)
FRAME_DEPTH = 200             # how deep a child's frame may nest (the grader's schema allows far less)
KILL_ROUNDS = 8               # finding and killing what a test left running, at most this many times
PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_CHILD_SUBREAPER = 4, 15, 36
LIBC = ctypes.CDLL(None, use_errno=True)


def emit(record: dict) -> None:
    data = (json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(OUT, data):]


class Channel:
    """The report channel's incoming side: one line per answer of the grader."""

    def __init__(self):
        self.buffer = b""

    def ask(self, test: int, case: int) -> list | None:
        """The specs of (test, case), straight from the grader, or None if none came."""
        emit({"ask": [test, case]})
        while b"\n" not in self.buffer:
            chunk = os.read(OUT, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer = json.loads(line)
        return answer.get("specs") if isinstance(answer, dict) else None


# --- the harness's side: inputs laid out in shared memory, watched ----------------------------

def shared_memory(size: int) -> calling.Layout:
    """The cases' arrays in memory shared with the child (MAP_SHARED | MAP_ANONYMOUS, inherited by it); the
    harness keeps its own copy of what it put there and compares after each call (calling.Layout)."""
    return calling.Layout(mmap.mmap(-1, max(size, calling.ALIGN)))


# --- the child's side: student code, and nothing that reaches the grader but its pipe ---------

def child(shared: calling.Layout, requests: int, answers: int, tests: int) -> None:
    """In the forked child: drop the channel, limits, quiet output, the cells, then each case it is
    sent (of the ``tests`` tests it may run)."""
    os.close(OUT)
    LIBC.prctl(PR_SET_NAME, b"mha-student", 0, 0, 0)
    LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc entries as usual (the harness stays closed)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    cpu = int(JOB["limits"]["test_cpu_s"]) * tests  # (each test's time and the job's one core bound it first)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    namespace, failures = run_cells(JOB["cells"])
    send(answers, {"cells": failures, "seq": 0})
    incoming = os.fdopen(requests, "rb")
    for line in incoming:
        case = json.loads(line)
        fn = namespace.get(case["function"])
        if not callable(fn):
            outcome = {"missing": case["function"]}
        else:
            outcome = calling.invoke(fn, case["names"], case["specs"], shared.view)
        send(answers, {**outcome, "seq": case["seq"]})


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


def send(fd: int, frame: dict) -> None:
    data = (json.dumps(frame) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


# --- the tests, driven from the harness ------------------------------------------------------

class Child:
    """The process that runs the cells, then the cases of one test after another: its pipes, and the
    deadline of the test it is running. Each request bears a number, and only a frame with that number
    answers it: whatever else reaches the pipe (what the student's code writes there, or the rest of an
    earlier answer) is read and skipped."""

    def __init__(self, shared: calling.Layout, tests: int, seconds: float):
        to_child, self.requests = os.pipe()
        self.answers, from_child = os.pipe()
        self.deadline = time.monotonic() + seconds  # (the caller sets it again for each test)
        self.failures: list = []  # the cells that raised, reported with each test it runs
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.close(self.requests)
                os.close(self.answers)
                child(shared, to_child, from_child, tests)
            finally:
                os._exit(0)
        os.close(to_child)
        os.close(from_child)
        self.pidfd = os.pidfd_open(self.pid)
        self.buffer = b""
        self.seq = 0  # the number of the frame awaited (0: the cells')

    def cells(self, seconds: float) -> tuple[str, object]:
        """Wait for the cells to have run: ("done", None), else (status, detail) as a test's."""
        kind, frame = self.frame()
        if kind == "timeout":
            return "cells", round(seconds, 1)
        if kind != "frame":
            return kind, frame
        failures = frame.get("cells") if isinstance(frame, dict) else None
        self.failures = failures if isinstance(failures, list) else []
        return "done", None

    def frame(self) -> tuple[str, object]:
        """("frame", the answer to the last request, as parsed JSON) or (status, detail) when none came."""
        while True:
            kind, frame = self._next()
            if kind != "frame" or isinstance(frame, dict) and frame.get("seq") == self.seq:
                return kind, frame
            if time.monotonic() > self.deadline:  # (lines that keep coming do not hold the test past its time)
                return "timeout", None

    def _next(self) -> tuple[str, object]:
        """("frame", the child's next frame as parsed JSON) or (status, detail) when it has none."""
        chunk = self.buffer
        while b"\n" not in chunk:  # (only the newest chunk can hold the line's end)
            left = self.deadline - time.monotonic()
            ready, _, _ = select.select([self.answers, self.pidfd], [], [], max(left, 0.0))
            if self.answers in ready:
                chunk = os.read(self.answers, 1 << 16)
                if chunk:
                    self.buffer += chunk
                    if len(self.buffer) > MAX_FRAME:
                        return "large", MAX_FRAME >> 20
                    continue
            return self.ended() if ready else ("timeout", None)
        line, self.buffer = self.buffer.split(b"\n", 1)
        return "frame", parse_frame(line)

    def ended(self) -> tuple[str, object]:
        """Wait for the child (it closed its pipe or ended): ("done"|"exit"|"signal", detail)."""
        ready, _, _ = select.select([self.pidfd], [], [], max(self.deadline - time.monotonic(), 0.0))
        if not ready:
            return "timeout", None
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if os.WIFSIGNALED(status):
            return "signal", os.WTERMSIG(status)
        code = os.WEXITSTATUS(status)
        return ("done", 0) if code == 0 else ("exit", code)

    def request(self, case: dict) -> bool:
        self.seq += 1
        try:
            send(self.requests, {**case, "seq": self.seq})
            return True
        except OSError:  # the child is gone
            return False

    def close(self) -> None:
        os.close(self.requests)
        if self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.answers)
        os.close(self.pidfd)


def run_test(index: int, test: dict, shared: calling.Layout, channel: Channel, job: Child, seconds: float) \
        -> tuple[str, object]:
    """Each case of the test: ask, lay out, call in the child, observe. (status, detail); "done": the
    child may run the next test."""
    if job.failures:
        emit({"test": test["id"], "cells": job.failures})
    for i, case in enumerate(test["cases"]):
        specs = channel.ask(index, i)
        if specs is None:
            return "exit", "no inputs"
        laid = shared.lay_out(case["names"], specs)
        if not job.request({"function": case["function"], "names": case["names"], "specs": laid}):
            return job.ended()
        kind, outcome = job.frame()
        if kind != "frame":
            return (kind, round(seconds, 1)) if kind == "timeout" else (kind, outcome)
        emit({"test": test["id"], "case": i, "outcome": observed(outcome, shared.changed(), case["names"])})
    return "done", 0


def parse_frame(line: bytes):
    """A child's line as JSON, at most FRAME_DEPTH deep (else None): whatever it holds, this process
    can parse it, write it out again and never raise."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(FRAME_DEPTH)
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None
    finally:
        sys.setrecursionlimit(limit)


def observed(outcome, changed: set[str], names: list[str]) -> dict:
    """The child's outcome (its result or its error: data, judged outside), with the arguments this process
    saw change in its shared memory. Whatever the child says of its arguments is not read: everything else a
    function receives cannot be changed in place (calling.build_argument), and an attempt to is its error."""
    if not isinstance(outcome, dict):
        outcome = {}
    kept = {k: v for k, v in outcome.items() if k in ("result", "error", "missing")}
    if "result" in kept and not calling.at_most(kept["result"]):  # (the grader reads no more: its work stays small)
        kept["result"] = calling.TOO_MANY_VALUES
    return {**kept, "mutated": [n for n in names if n in changed]}


def kill_the_rest(keep: int | None = None) -> None:
    """Kill every other process of this user (what a test left running) but ``keep`` (the child, which
    runs the next test); this one survives.

    Only in the sandbox's own PID namespace: anywhere else, kill(-1) would reach every process of
    the user running it (the unsafe mode runs without a namespace)."""
    if not JOB.get("own_namespace"):
        return
    if keep is None:
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
        return
    me = os.getpid()
    for _ in range(KILL_ROUNDS):  # (a process may fork while it is being found)
        found = {pid: seen for pid, seen in processes().items() if pid not in (keep, me)}
        living = [pid for pid, (state, _) in found.items() if state not in (b"Z", b"X")]
        for pid in living:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in (pid for pid, (_, parent) in found.items() if parent == me):
            try:
                os.waitpid(pid, 0)  # (killed: it ends at once) the others are their parents' to reap
            except ChildProcessError:
                pass
        if not living:
            break


def processes() -> dict[int, tuple[bytes, int]]:
    """{pid: (its state, its parent)} of every process of the namespace."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    state, parent = fh.read().rsplit(b")", 1)[1].split()[:2]
            except (OSError, ValueError):
                continue  # it has just ended
            found[int(name)] = state, int(parent)
    return found


def main() -> None:
    LIBC.prctl(PR_SET_NAME, b"mha-harness", 0, 0, 0)
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of this user may read or write this one's memory
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of a test come back here to be reaped
    emit({"harness": "started"})
    if JOB.get("torch"):
        import torch  # imported once here, inherited by the child
        torch.set_num_threads(1)
    shared, channel = shared_memory(int(JOB["shared_bytes"])), Channel()
    deadline = time.monotonic() + JOB["limits"]["notebook_s"]
    stuck = None  # the cells themselves never finished: every later test would hang the same way
    job = None    # the child, while it lives
    for index, test in enumerate(JOB["tests"]):
        left = deadline - time.monotonic()
        if stuck or left <= 0:
            emit({"test": test["id"], "status": "cells" if stuck else "budget",
                  "detail": stuck or JOB["limits"]["notebook_s"]})
            continue
        seconds = min(JOB["limits"]["test_s"], left)
        if job is None:  # the first test, or the last one ended the child: a new one runs the cells
            job = Child(shared, len(JOB["tests"]) - index, seconds)
            status, detail = job.cells(seconds)
        else:
            job.deadline, status = time.monotonic() + seconds, "done"
        if status == "done":
            status, detail = run_test(index, test, shared, channel, job, seconds)
        if status == "done" and job.pid is not None:
            kill_the_rest(keep=job.pid)
        else:  # the child ended, hung or sent too much (the status says which): it goes, the next test gets a new one
            job.close()
            job = None
            kill_the_rest()
        if status == "cells":
            stuck = detail
        emit({"test": test["id"], "status": status, "detail": detail})
    # (a child still running ends with this process: the kernel ends the namespace with its pid 1)


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    main()
