"""Where jobs run: the job function every worker calls, the grader's version fingerprint, and the
local backend (a pool of threads that run at most ``workers`` sandboxes at a time).

This module executes and knows nothing of the course folder or the gradebook: run.py plans the jobs and
records the results; cluster.py is the other backend (Dask). Both backends give the same thing back,
(job, result) pairs as jobs finish, where a result is the judge's dict or, for a job that could not be
graded, ``{"failed": "<one sentence>"}``. Only a failure of the sandbox (InfraError), or a job the machine
held back (MachineHeld: a time limit stopped it before the student's code had spent that time), is tried
again; after the retries such a notebook "could not be graded" (never a 0, never stamped: the next run
grades it). A bug of the grader is reported once, plainly.
"""
import concurrent.futures as cf
import contextlib
import functools
import hashlib
import importlib.metadata
import json
import platform
import queue
import threading
import time
from pathlib import Path

from ..walls import sandbox
from . import feedback, jobs, judging, notebooks
from .text import clause

RETRIES = 2  # a sandbox failure is tried this many more times
PACKAGES = ("numpy", "torch", "nbgrader", "distributed", "latex2mathml")  # what the judge, the sandbox, the
#                                                                      recording and the feedback pages rest on
SOURCES = ("mha_checks", "mha_grader")
ROOT = Path(__file__).resolve().parents[2]


class InfraError(RuntimeError):
    """The sandbox itself failed (not the student's code, not the grader's logic): the job is tried again."""


class MachineHeld(InfraError):
    """The machine, not the student's code, used up a job's time (judging._the_machines): tried again."""


class WrongVersion(RuntimeError):
    """No worker runs this grader version: nothing can be graded (the message says which and why)."""


class SchedulerLost(RuntimeError):
    """The Dask scheduler went away or stopped answering: nothing more can be graded through it (the
    message says which scheduler, what happened and what to do)."""


def grade_job(release, job: dict, limits: sandbox.Limits, unsafe: bool) -> dict:
    """One notebook, on any worker: the judge's result with its feedback rendered here (not where it is
    recorded), or {"unchanged": True} for bytes graded before, or {"failed": sentence} when the grader itself
    failed on it (reported once, never retried). Raises InfraError when the sandbox failed.

    ``job`` (jobs.Maker) carries the notebook's bytes ("raw"; None with the "reason" it was not read), decoded
    here within notebooks.parse's bounds, and the seeds its hidden cases are drawn from here (jobs.draw)."""
    if job.get("unchanged"):
        return {"unchanged": True}
    try:
        nb, reason = notebooks.parse(job["raw"]) if job.get("raw") is not None else (None, job["reason"])
        result = judging.grade_notebook(release, nb, reason, jobs.draw(job["seeds"]), limits, unsafe)
        if result["status"] == "infra":
            raise InfraError("the sandbox returned nothing (" + ("; ".join(result["notes"]) or "no detail") + ")")
        if result["status"] == "machine":
            raise MachineHeld("; ".join(result["notes"]))
        result["feedback"] = feedback.render(release, nb if result["status"] == "graded" else None, result,
                                             job["student"])
    except (sandbox.Ended, InfraError):
        raise
    except (OSError, sandbox.SandboxUnavailable) as err:
        raise InfraError(f"the sandbox could not run it ({sentence(err)})") from err
    except Exception as err:  # noqa: BLE001 - a bug of the grader: this notebook fails, the class goes on
        return {"failed": f"the grader itself failed on this notebook ({sentence(err)}); this is a bug in the "
                          "grader, not the student's doing"}
    return result


def sentence(err: BaseException) -> str:
    """An exception as words, a clause (text.clause): its type and message, never an empty string or 'None'."""
    text = clause(err)
    return f"{type(err).__name__}: {text}" if text else f"{type(err).__name__} (no message)"


# --- one grader version per run ----------------------------------------------------------------

@functools.cache
def manifest() -> dict[str, str]:
    """What grades a notebook here: sha256 of every source file of the grader and the checks, and the
    versions of the packages they rest on (and of Python)."""
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[str(path.relative_to(ROOT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def fingerprint(of: dict[str, str] | None = None) -> str:
    """A short name of a manifest (by default this process's own)."""
    return hashlib.sha256(json.dumps(manifest() if of is None else of, sort_keys=True).encode()).hexdigest()[:16]


def differences(theirs: dict[str, str], ours: dict[str, str] | None = None) -> str:
    """What differs between another manifest and ours, in words (at most five items)."""
    ours = manifest() if ours is None else ours
    names = sorted(n for n in set(ours) | set(theirs) if ours.get(n) != theirs.get(n))
    words = [(f"{n} {theirs.get(n, 'missing')} (here {ours.get(n, 'missing')})" if "/" not in n
              else f"{n} {'differs' if n in ours and n in theirs else 'is missing on one side'}") for n in names]
    return "; ".join(words[:5]) + (f"; and {len(words) - 5} more" if len(words) > 5 else "")


# --- the local backend -------------------------------------------------------------------------

class Threads:
    """``workers`` jobs at a time in this process's threads, each in its own sandbox, driven by one thread
    more than that: while the sandboxes run, that thread judges a result and renders its feedback."""

    def __init__(self, releases: dict, workers: int, limits: sandbox.Limits, unsafe: bool):
        self.releases, self.limits, self.unsafe = releases, limits, unsafe
        self.pool = cf.ThreadPoolExecutor(max(1, workers) + 1, thread_name_prefix="mha-job")
        self.turns = _Turns(max(1, workers))  # the sandboxes running at a time, and since when
        self.stopping = threading.Event()
        self.futures: dict = {}
        sandbox.accept_new()

    def start(self, plan: list[dict], make=None) -> None:
        """Grade the plan's records; ``make`` (jobs.Maker) makes each one's job in the thread that grades it,
        just before (without it, the records are the jobs)."""
        self.make = make or _as_made
        self.finished = queue.SimpleQueue()  # futures, as they finish
        self.futures = {self.pool.submit(self._attempt, record): record for record in plan}
        for future in self.futures:
            future.add_done_callback(self.finished.put)

    def results(self, quiet_s: float):
        """(job, result) as jobs finish; None each time ``quiet_s`` seconds pass without one."""
        for _ in self.futures:
            while (future := self._next_finished(quiet_s)) is None:
                yield None
            yield self.futures[future], future.result()

    def _next_finished(self, seconds: float):
        """The next finished future, or None if none finishes within ``seconds``."""
        try:
            return self.finished.get(timeout=seconds)
        except queue.Empty:
            return None

    def notes(self) -> list[str]:
        return []  # (one process: one grader version)

    def in_progress(self) -> list[tuple[str, float]]:
        """("student/notebook", since) of each job whose sandbox runs now (for the progress line)."""
        return self.turns.holders()

    def stop(self) -> int:
        """Cancel the jobs not started, end the running sandboxes; returns how many were running."""
        self.stopping.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
        return sandbox.end_all()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _attempt(self, record: dict) -> dict:
        if self.stopping.is_set():
            return {"failed": "grading stopped before this notebook was graded"}
        try:
            job = self.make(record)  # its bytes read now, while other threads' sandboxes run
        except Exception as err:  # noqa: BLE001 - a bug of the grader: this notebook fails, the class goes on
            return {"failed": f"its job could not be made ({sentence(err)}); this is a bug in the grader"}
        with sandbox.taking_turns(self.turns), self.turns.for_job(f"{job['student']}/{job['notebook']}"):
            return attempt(self.releases[job["notebook"]], job, self.limits, self.unsafe, self.stopping)


def _as_made(record: dict) -> dict:
    return record


class _Turns(threading.BoundedSemaphore):
    """The sandboxes' turns (a semaphore), noting which job holds each and since when."""

    def __init__(self, value: int):
        super().__init__(value)
        self.local, self.held, self.guard = threading.local(), {}, threading.Lock()

    @contextlib.contextmanager
    def for_job(self, name: str):
        """Turns this thread takes while the block lasts are held by job ``name``."""
        self.local.job = name
        try:
            yield
        finally:
            self.local.job = None

    def __enter__(self):
        self.acquire()
        with self.guard:
            self.held[threading.get_ident()] = (getattr(self.local, "job", None) or "a notebook", time.monotonic())

    def __exit__(self, *exc):
        with self.guard:
            self.held.pop(threading.get_ident(), None)
        self.release()

    def holders(self) -> list[tuple[str, float]]:
        with self.guard:
            return list(self.held.values())


def attempt(release, job: dict, limits: sandbox.Limits, unsafe: bool, stopping: threading.Event) -> dict:
    """grade_job, a sandbox failure tried again RETRIES times: the result, or {"failed": sentence}. Once
    ``stopping`` is set, a notebook is not graded (nor is one whose sandbox the stop ended: never a grade)."""
    error = ""
    for tries in range(RETRIES + 1):
        if stopping.is_set():
            return {"failed": "grading stopped before this notebook was graded"}
        try:
            result = grade_job(release, job, limits, unsafe)
        except sandbox.Ended:
            return {"failed": "grading stopped while this notebook was being graded"}
        except InfraError as err:
            error = str(err)
            stopping.wait(0.5 * (tries + 1))
        else:
            return {"failed": "grading stopped while this notebook was being graded"} if stopping.is_set() else result
    return {"failed": f"{error}; tried {RETRIES + 1} times"}
