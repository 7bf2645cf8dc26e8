"""The job's pid 1 (inside/__init__.py says who runs where): run the tests, each in a child that runs the
cells and calls the graded functions (student.py), and report every event on the report channel.

/job/job.json holds the cells and, per test, which function each case calls (names, never inputs).
The report channel (the descriptor named by its argument, a socket) carries one JSON line per event
out:

  {"harness": "started"}                          before any student code exists
  {"ask": [t, i]}                                 the inputs of test t's case i, please (answered on
                                                  the same socket with one line {"specs": [...]})
  {"test": id, "case": i, "outcome": {...}}       the call's outcome (plain data)
  {"test": id, "cells": [{"label", "type", "message", "line"}]}   cells that raised
  {"test": id, "status": "done" | "timeout" | "signal" | "exit" | "budget" | "cells" | "large" | "spent" | "wall",
   "detail": ..., "time": {"cpu", "own", "wall", "notebook_cpu", "notebook_own"}}

("cells": the notebook's own cells did not finish within a test's time, so this test and every
later one cannot run; "budget": not run, the notebook's time is spent; "spent": stopped when the
notebook's time ran out; "wall": stopped by the wall-clock backstop before the student's code had
spent its time, and so is every later test; "large": the call's result was larger than a record may be.)

A test's time is the student's own (Clock, Budget): its CPU time, read from the job cgroup's count, and
the time its code spent waiting by itself (sleeping, blocked), which is the time this process waited for
it less what the machine took (each task's run-queue wait, this process's own lateness). "time" gives the
seconds spent, as read here; the judge, outside, decides from them whose the time was: a test stopped
before its code spent its own seconds ("wall", or facts that do not add up) is never the student's
verdict, and the notebook is graded again. A busy machine makes a test take longer in wall-clock time,
never changes its verdict; a paused one likewise.

The child's frames are data: a value the function returned, or the error it raised (an error whose
description raises is sent as one without words). Whether the call changed its arguments in place
is observed here, by comparing the shared memory with the private copy after the child answers: the
child cannot hide a change it made. Nothing else a function receives can be changed in place (a list
argument, mha, an array's shape: see calling.build_argument; an attempt raises in the child, and
costs the test), so nothing the child says about its arguments is read. Every way the child can end
is a state of this process with a verdict for one test (the Child class lists them): an exit of any
status (0 included) or a signal before the answer awaited, a hang, an answer too large; each costs
the test it happened in, every other process of the student's is then killed, and the next test gets
a new child, which runs the cells again. A child an earlier test left running that ends before
answering anything of the current test is replaced and the test run again, once, in a new child (the
end belongs to the tests before, which have their answers). Nothing here decides a grade: the judge,
outside, validates every record and compares with the reference.
"""
import ctypes
import json
import mmap
import os
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calling  # noqa: E402 - copied next to this file into the job folder, as student.py and as_student.py are
import student  # noqa: E402
from clock import CHECK_S, Budget, Clock, Mark  # noqa: E402

OUT = int(sys.argv[1]) if len(sys.argv) > 1 else 3
COUNT = [int(sys.argv[2])] if len(sys.argv) > 2 else []  # the job cgroup's CPU count, open (walls/forkserver.py)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.json")) as _fh:
    JOB = json.load(_fh)
MAX_FRAME = 6 * 1024 * 1024   # the largest outcome a child may send (the grader reads 8 MB per line)
FRAME_DEPTH = 200             # how deep a child's frame may nest (the grader's schema allows far less)
KILL_ROUNDS = 8               # finding and killing what a test left running, at most this many times
PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_CHILD_SUBREAPER = 4, 15, 36
LIBC = ctypes.CDLL(None, use_errno=True)
CLOCK = None  # the job's Clock (main)


def emit(record: dict) -> None:
    data, since = (json.dumps(record) + "\n").encode(), time.monotonic()
    while data:
        data = data[os.write(OUT, data):]
    if CLOCK:  # (a grader that does not read holds this process: that time is no one's)
        CLOCK.for_the_grader(since)


class Channel:
    """The report channel's incoming side: one line per answer of the grader."""

    def __init__(self):
        self.buffer = b""
        self.latest: tuple = (None, None)  # ((test, case), its specs): the latest answer

    def ask(self, test: int, case: int) -> list | None:
        """The specs of (test, case), straight from the grader, or None if none came. (The grader answers
        each once: asked again for the latest, as when a test runs again in a new child, the harness's
        copy answers.)"""
        if self.latest[0] == (test, case):
            return self.latest[1]
        emit({"ask": [test, case]})
        since = time.monotonic()
        while b"\n" not in self.buffer:
            chunk = os.read(OUT, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        CLOCK.for_the_grader(since)  # (the grader's answer, however long it took, is no one's time)
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer = json.loads(line)
        specs = answer.get("specs") if isinstance(answer, dict) else None
        self.latest = ((test, case), specs)
        return specs


# --- the harness's side: inputs laid out in shared memory, watched ----------------------------

def shared_memory(size: int) -> calling.Layout:
    """The cases' arrays in memory shared with the child (MAP_SHARED | MAP_ANONYMOUS, inherited by it); the
    harness keeps its own copy of what it put there and compares after each call (calling.Layout)."""
    return calling.Layout(mmap.mmap(-1, max(size, calling.ALIGN)))


# --- the tests, driven from the harness ------------------------------------------------------

class Child:
    """The process that runs the cells, then the cases of one test after another: its pipes, and the
    time of the test it is running (its clock.Budget). Each request bears a number, and only a frame with
    that number answers it: whatever else reaches the pipe (what the student's code writes there, or the
    rest of an earlier answer) is read and skipped.

    Its states, as the harness sees them: running (it may answer), then ended (``self.end``, set once,
    when it is reaped: ("exit", status) or ("signal", number)). Whenever the harness waits for an answer
    it gets one of: the frame awaited; "timeout" (nothing before the test's time was up: its Budget says
    which limit; the child is then killed); "large" (a line past MAX_FRAME); or the child's end, whatever
    its status, 0 included: a child ends by itself only before it answered. A child that ends after its
    last answer of a test costs nothing: the next test gets a new one (see :meth:`gone`)."""

    def __init__(self, shared: calling.Layout, budget: Budget):
        to_child, self.requests = os.pipe()
        self.answers, from_child = os.pipe()
        self.budget = budget  # (the caller sets it again for each test)
        self.failures: list = []  # the cells that raised, reported with each test it runs
        self.pid = os.fork()
        if self.pid == 0:
            status = 1  # (the harness's own code in the child raised: the student's code broke it)
            try:
                os.close(self.requests)
                os.close(self.answers)
                student.main(JOB, [OUT, *COUNT], shared, to_child, from_child)
                status = 0  # (the harness closed the requests: never before the child's last answer)
            finally:
                os._exit(status)
        os.close(to_child)
        os.close(from_child)
        os.set_blocking(self.requests, False)  # (a child that reads nothing cannot hold the harness)
        self.pidfd = os.pidfd_open(self.pid)
        CLOCK.child = self.pid
        self.buffer = b""
        self.seq = 0  # the number of the frame awaited (0: the cells')
        self.answered = 0  # how many frames it sent that answered a request
        self.end: tuple[str, int] | None = None

    def cells(self) -> tuple[str, object]:
        """Wait for the cells to have run: ("done", None), else (status, detail) as a test's ("cells" when the
        test's own limit stopped them)."""
        kind, frame = self.frame()
        if kind == "timeout":
            status, detail = self.budget.stop()
            return "cells" if status == "timeout" else status, detail
        if kind != "frame":
            return kind, frame
        failures = frame.get("cells") if isinstance(frame, dict) else None
        self.failures = failures if isinstance(failures, list) else []
        return "done", None

    def frame(self) -> tuple[str, object]:
        """("frame", the answer to the last request, as parsed JSON) or (status, detail) when none came."""
        while True:
            kind, frame = self._next()
            if kind == "frame" and isinstance(frame, dict) and frame.get("seq") == self.seq:
                self.answered += 1
                return kind, frame
            if kind != "frame":
                return kind, frame
            if self.budget.left() <= 0:  # (lines that keep coming do not hold the test past its time)
                return "timeout", None

    def _next(self) -> tuple[str, object]:
        """("frame", the child's next frame as parsed JSON) or (status, detail) when it has none."""
        chunk = self.buffer
        while b"\n" not in chunk:  # (only the newest chunk can hold the line's end)
            ready, _ = self.wait([self.answers, self.pidfd])
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
        """The child closed its pipe, or ended, before it answered: its end, ("exit", status) or
        ("signal", number), once it has ended; "timeout" if it lives on past the test's time."""
        if self.end is None:
            if not self.wait([self.pidfd])[0]:
                return "timeout", None
            self._reap()
        return self.end

    def gone(self) -> bool:
        """Whether the child has ended by now (it may, between two tests: a thread of the student's)."""
        if self.end is None and select.select([self.pidfd], [], [], 0)[0]:
            self._reap()
        return self.end is not None

    def _reap(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self.end = ("signal", os.WTERMSIG(status)) if os.WIFSIGNALED(status) else ("exit", os.WEXITSTATUS(status))

    def wait(self, readable: list, writable: tuple = ()) -> tuple[list, list]:
        """Wait until one of the descriptors is ready: (those ready to read, to write), both empty once the
        test's time is up."""
        while (left := self.budget.left()) > 0:
            ready, ready_w = CLOCK.select(readable, list(writable), min(left, CHECK_S))
            if ready or ready_w:
                return ready, ready_w
        return [], []

    def request(self, case: dict) -> bool:
        """Send the next request within the test's time; False if the child cannot take it (gone, or its pipe
        closed or full until then)."""
        self.seq += 1
        data = (json.dumps({**case, "seq": self.seq}) + "\n").encode()
        while data:
            if not self.wait([], [self.requests])[1]:
                return False
            try:
                data = data[os.write(self.requests, data):]
            except BlockingIOError:
                continue
            except OSError:  # (EPIPE: it closed its end, or is gone)
                return False
        return True

    def close(self) -> None:
        """Kill it if it lives, and reap it."""
        os.close(self.requests)
        if self.end is None:
            os.kill(self.pid, signal.SIGKILL)
            self._reap()
        os.close(self.answers)
        os.close(self.pidfd)


def run_test(index: int, test: dict, shared: calling.Layout, channel: Channel, job: Child) -> tuple[str, object]:
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
            kind, outcome = job.ended()  # (its end, or "timeout": it lives but took no request)
        else:
            kind, outcome = job.frame()
        if kind == "timeout":
            return job.budget.stop()
        if kind != "frame":
            return kind, outcome
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
        until_ended(living)
        for pid in (pid for pid, (_, parent) in found.items() if parent == me):
            try:
                os.waitpid(pid, 0)  # (killed: it ends at once) the others are their parents' to reap
            except ChildProcessError:
                pass
        if not living:
            break


def until_ended(pids: list[int], seconds: float = 1.0) -> None:
    """Wait (``seconds`` at most) until each of ``pids`` has ended: a process killed ends at once, but not
    always before the next test could see it still running."""
    waiting = []
    for pid in pids:
        try:
            waiting.append(os.pidfd_open(pid))
        except OSError:
            pass  # already gone
    deadline = time.monotonic() + seconds
    try:
        while waiting and (left := deadline - time.monotonic()) > 0:
            for fd in select.select(waiting, [], [], left)[0]:  # (a pidfd is readable once its process ended)
                waiting.remove(fd)
                os.close(fd)
    finally:
        for fd in waiting:
            os.close(fd)


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
    global CLOCK
    LIBC.prctl(PR_SET_NAME, b"mha-harness", 0, 0, 0)
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of this user may read or write this one's memory
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of a test come back here to be reaped
    emit({"harness": "started"})
    if JOB.get("torch"):
        import torch  # imported once here, inherited by the child
        torch.set_num_threads(1)
    shared, channel = shared_memory(int(JOB["shared_bytes"])), Channel()
    limits = JOB["limits"]
    CLOCK = Clock(COUNT[0] if COUNT else None, bool(JOB.get("own_namespace")))
    notebook = Mark(CLOCK)
    stuck = None  # the cells themselves never finished: every later test would hang the same way
    late = None   # the backstop stopped a test: the machine, not the student, holds the job back
    job = None    # the child the last test left running, if any
    for index, test in enumerate(JOB["tests"]):
        budget = Budget(CLOCK, notebook, limits)
        if late is None and time.monotonic() - notebook.wall >= limits["backstop"] * limits["notebook_s"]:
            late = ("wall", limits["backstop"] * limits["notebook_s"]), budget.facts()
        if stuck or late or budget.spent_before():
            (status, detail), facts = stuck or late or (("budget", limits["notebook_s"]), budget.facts())
            emit({"test": test["id"], "status": status, "detail": detail, "time": facts})
            continue
        job, status, detail = test_in_a_child(index, test, shared, channel, job, budget)
        facts = budget.facts()
        if status == "cells":
            stuck = (status, detail), facts  # (what the later tests report: this test's time)
        if status == "wall":
            late = (status, detail), facts
        emit({"test": test["id"], "status": status, "detail": detail, "time": facts})
    # (a child still running ends with this process: the kernel ends the namespace with its pid 1)


def test_in_a_child(index: int, test: dict, shared: calling.Layout, channel: Channel, job: Child | None,
                    budget: Budget) -> tuple[Child | None, str, object]:
    """Run test ``index`` in ``job`` (the child the last test left running) or in a new one that runs the
    cells first, within ``budget``: (the child for the next test, None if it goes; the test's status and detail).

    A test is charged only for an end in a child that ran it from the start: a reused child that
    ends before answering anything of this test (a thread of an earlier test's, say) is replaced
    and the test run again, once, in a new child; whatever ended it belongs to the tests before,
    which have their answers. Every other end, a timeout or an answer too large costs this test."""
    reported_cells = False
    for _ in range(2):
        if job is not None and job.gone():
            job = discard(job)
        reused = job is not None
        if job is None:
            job = Child(shared, budget)
            status, detail = job.cells()
            if reported_cells:
                job.failures = []  # (the first try reported them already: once per test)
        else:
            job.budget, status, detail = budget, "done", None
        if status != "done":
            break
        answered, reported_cells = job.answered, reported_cells or bool(job.failures)
        status, detail = run_test(index, test, shared, channel, job)
        if not (reused and status in ("exit", "signal") and job.answered == answered):
            break
        job = discard(job)
    if status == "done" and not job.gone():
        kill_the_rest(keep=job.pid)
        return job, status, detail
    return discard(job), status, detail  # it ended, hung or sent too much (the status says which)


def discard(job: Child) -> None:
    """End the child and everything its tests left running."""
    job.close()
    kill_the_rest()


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    main()
