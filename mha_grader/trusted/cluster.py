"""Grading on Dask distributed: the same jobs as the local threads (execute.Threads), run by Dask workers.

    python -m mha_grader grade --scheduler local              # a LocalCluster here (W processes x 1 thread)
    python -m mha_grader grade --scheduler tcp://HOST:8786     # an existing scheduler

Other machines join a scheduler with ``dask worker tcp://HOST:8786 --nthreads 1 --nworkers N --preload
mha_grader.trusted.cluster`` run from a checkout of this repository (same commit) inside its venv, with the
repository root on PYTHONPATH (see the README); the preload imports the grader and checks the sandbox as
the worker starts, before it takes jobs. A worker runs only execute.grade_job (the sandbox and the judge):
it needs no course folder, no secret and no gradebook. Each job carries its notebook's bytes (read once
by the coordinator as the job is made, jobs.Maker; decoded on the worker) and the seeds of the hidden
cases (secret.seed, drawn on the worker: jobs.draw); the result (plain data) comes back to the
coordinating process, which alone records it.

One grader version per run: every job asks for a Dask resource named after the coordinator's
fingerprint (execute.fingerprint: the grader's and the checks' source, the packages they rest on). A
worker plugin gives that resource only to a worker whose own fingerprint is the same, now or when it
joins later, so a worker at another version never receives a job; the run says which worker and why.

Each student is one Dask task (all of that student's notebooks, graded one after the other: Dask's cost
per task is paid once per student, not once per notebook), whose key names the student and this run;
each (student, notebook) is planned once in a run (a job planned twice is refused), so none is graded
twice and none is left out. Their results come back together, as the task ends. A sandbox failure of one
notebook (InfraError) is tried again on the worker (execute.attempt); a task that fails as a whole (the
worker's sandbox does not isolate, or its grader is another version) is retried by Dask (``retries``);
the task of a worker that dies is given to another worker (Dask's allowed-failures), and a result lost
with its worker before it was fetched is computed again.

A stop reaches the workers (stop_run): the run's stop is set there, so a running task grades no further
notebook and starts no sandbox, and the sandboxes it runs are ended; what was not graded comes back as
not graded. The stop is the run's own (a worker may outlive runs and serve another one meanwhile).

A worker that holds jobs and makes no progress (stopped, swapping, cut off) is left by Dask's own means:
its heartbeats stop, and a scheduler whose ``distributed.scheduler.worker-ttl`` has passed (WORKER_TTL
for the schedulers the grader starts: a LocalCluster here, scripts/services.py; the README says how to
start another) drops it (its nanny restarts it) and gives its tasks to the workers that are alive. The
run names such a worker on the terminal once the scheduler has not heard from it for SILENT_S, from the
scheduler's own view (each worker's last heartbeat), and says when it is dropped or answers again; it
asks the scheduler to drop it only where the scheduler's own worker-ttl is longer than WORKER_TTL (or
off). A task is known by its key (the student and the run): its result is taken once, from whichever
worker Dask accepted it from; a late result of a dropped worker is refused by the scheduler, never
counted twice.

The wait for results never outlasts the cluster: the client's connection is looked at every poll, and
every LIVENESS_S the scheduler is asked (answer within ANSWER_S) which workers can take this run's jobs.
A scheduler that closed the connection or does not answer ends the run (execute.SchedulerLost); so does
a run left for WORKERLESS_S with no worker of its version once it had one (execute.WrongVersion): the
workers still connected run another version, or none is left. A run started before any worker joined
waits for them (and says so).
"""
import functools
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import CancelledError
from pathlib import Path

from distributed import WorkerPlugin
from distributed.scheduler import heartbeat_interval

from ..walls import probing, sandbox
from . import execute
from .text import clause

PLUGIN = "mha-grader-version"
LOCAL_WORKER = "MHA_GRADER_LOCAL_WORKER"  # set for the workers of a LocalCluster started by a grading run

POLL_S = 0.005  # how often results() looks for a finished task while none is waiting
CONNECT_S = 10  # to reach the scheduler as the run starts
ANSWER_S = 5  # the longest the scheduler may take to answer the run (which workers, stop, forget)
LIVENESS_S = 1.0  # how often the wait for results asks the scheduler which workers can take the run's jobs
WORKERLESS_S = 5.0  # how long a run that had a worker of its version may go without one before it stops
WINDOW_PER_THREAD = 2  # students submitted ahead per worker thread (each task holds their notebooks' bytes)
WORKER_TTL = "15s"  # a worker that sent no heartbeat for this long is dropped (distributed.scheduler.worker-ttl)
SILENT_S = 10.0  # a worker the scheduler has not heard from for this long (3 heartbeats at least) is named


class Dask:
    """The jobs of a run as Dask tasks, one per student, on a LocalCluster started here or an existing scheduler."""

    def __init__(self, scheduler: str, workers: int, releases: dict, limits: sandbox.Limits, unsafe: bool):
        self.releases, self.limits, self.unsafe, self.workers = releases, limits, unsafe, workers
        self.started = time.monotonic()
        self.cluster, self.client = _connect(scheduler, workers)
        self.address = self.client.scheduler.address
        self.resource = f"mha-grader-{execute.fingerprint()}"
        self.next_check, self.admitted, self.admitted_at = 0.0, [], None  # see _alive
        self.lost = False  # the scheduler went away or did not answer: it is asked nothing more
        self.jobs: dict = {}  # task key -> the student's jobs
        self.planned: set = set()  # (student, notebook) of every job submitted
        self.pending: set = set()  # submitted, not yet given back
        self.sent: dict = {}  # task key -> (its student and notebooks in words, when it was submitted)
        self.waiting = iter(())
        self.refused: list[str] = []
        self.submitted = 0  # students submitted so far
        self.run_id, self.stopped = uuid.uuid4().hex[:12], False  # a key of this run never meets another run's
        self.heard: dict = {}  # worker address -> (its last heartbeat as the scheduler says, when that changed here)
        self.silent: dict = {}  # worker address -> its name, for the workers named silent
        self.dropped: set = set()  # the silent workers this run asked the scheduler to drop
        self.ttl = self._scheduler_ttl()  # the scheduler's worker-ttl in seconds (None: off)

    def start(self, plan: list[dict], make=None) -> None:
        """Submit the first window of students (after the version check: see notes()); ``make`` (jobs.Maker)
        makes each record's job as its student is submitted (without it, the records are the jobs)."""
        from distributed import as_completed
        self.make = make or (lambda record: record)
        threads = self._admit_workers()
        self.waiting, self.running = iter(_per_student(plan)), as_completed()
        for _ in range(WINDOW_PER_THREAD * max(1, threads, self.workers)):
            self._submit_next()

    def _submit_next(self) -> None:
        """The next student's jobs, made now: their notebooks are read just now, once, and travel as their bytes
        (decoded on the worker, never here), so only a window of students' notebooks is held at once."""
        jobs = next(self.waiting, None)
        if jobs is None:
            return
        for job in jobs:
            assert (job["student"], job["notebook"]) not in self.planned, \
                f"{job['student']}/{job['notebook']} planned twice"
            self.planned.add((job["student"], job["notebook"]))
        key = f"mha-grade/{jobs[0]['student']}/{self.run_id}"  # ids hold no "/"; a student is one task a run
        self.jobs[key] = jobs
        self.sent[key] = (f"{jobs[0]['student']} ({len(jobs)} notebook{'s' if len(jobs) > 1 else ''})", time.monotonic())
        self.submitted += 1
        # The releases travel inside the task (40 kB in all), not as other tasks or scattered data: a task is
        # ready on any worker as it arrives (no dependency to fetch first, which let later students overtake
        # earlier ones), and one lost with its worker is run again from the scheduler's copy.
        releases = {job["notebook"]: self.releases[job["notebook"]] for job in jobs}
        future = self.client.submit(grade_student_on_worker, releases, [self.make(job) for job in jobs],
                                    self.limits, self.unsafe, execute.fingerprint(), self.run_id, key=key,
                                    pure=False, retries=execute.RETRIES, resources={self.resource: 1},
                                    priority=-self.submitted)  # in the plan's order, wherever they are queued
        self.pending.add(future)
        self.running.add(future)

    def results(self, quiet_s: float):
        """(job, result) as tasks finish, a student's one after the other; each task done lets the next student
        in. None each time ``quiet_s`` seconds pass without a result."""
        while self.running.count():
            if not self._ready_within(quiet_s):
                yield None
                continue
            future = next(self.running)
            if future.cancelled() and not self.stopped:
                self._alive()  # the client cancels every future as it loses the scheduler: not the jobs' failure
            self._submit_next()
            outcome = self._fetched(future)
            jobs = self.jobs.pop(future.key)
            self.sent.pop(future.key, None)
            outcomes = outcome if isinstance(outcome, list) else [dict(outcome) for _ in jobs]  # the task failed
            yield from zip(jobs, outcomes, strict=True)
            self.pending.discard(future)
            future.release()

    def _ready_within(self, seconds: float) -> bool:
        """Whether a finished task is waiting, or one finishes within ``seconds`` (looked at every POLL_S)."""
        deadline = time.monotonic() + seconds
        while not self.running.has_ready():
            self._alive()
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        return True

    def _fetched(self, future) -> dict:
        """The outcome of a finished task, the workers watched meanwhile: a result held by a stopped worker comes
        only once the scheduler has dropped that worker and computed the task again elsewhere."""
        while True:
            try:
                return _outcome(future, timeout=LIVENESS_S)
            except TimeoutError:
                self._alive()

    def _alive(self) -> None:
        """Raise SchedulerLost when the scheduler closed the connection or does not answer, WrongVersion when
        no worker of this version has been connected for WORKERLESS_S (after one was)."""
        if self.client.status != "running":
            raise execute.SchedulerLost(self._lost())
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + LIVENESS_S
        workers = self._asked(self.client.scheduler.identity, n_workers=-1)["workers"]
        self._watch_heartbeats(workers, now)
        admitted = sorted(a for a, w in workers.items() if (w.get("resources") or {}).get(self.resource))
        if admitted:
            self.admitted, self.admitted_at = admitted, now
        elif self.admitted_at is not None and now - self.admitted_at >= WORKERLESS_S:
            raise execute.WrongVersion(no_worker(self._refusals(), now - self.admitted_at, self.admitted))

    def _watch_heartbeats(self, workers: dict, now: float) -> None:
        """Name on the terminal each worker that holds this run's jobs and that the scheduler has not heard from for
        SILENT_S (stopped, swapping, cut off), once; then when the scheduler drops it (its jobs go to the others)
        or it answers again. A scheduler whose worker-ttl is longer than WORKER_TTL (or off) is asked to drop it."""
        for address, info in workers.items():
            seen, before = info.get("last_seen"), self.heard.get(address)
            if before is None or seen != before[0]:
                self.heard[address] = (seen, now)
                if self.silent.pop(address, None) is not None:
                    _say(f"Dask worker {_named(address, info)} answers the scheduler again.")
                continue
            quiet = now - before[1]
            if address not in self.silent and quiet >= max(SILENT_S, 3 * heartbeat_interval(len(workers))):
                held = self._held_by(address)
                if held:
                    self.silent[address] = _named(address, info)
                    _say(f"Dask worker {self.silent[address]} has not answered the scheduler for {quiet:.0f} s (stopped, "
                         f"swapping or cut off) and holds {_students(held)}: " + (
                             f"the scheduler drops it after {self.ttl:g} s of silence and gives its jobs to the "
                             "workers that are alive." if self._ttl_ok() else
                             "its jobs go to the workers that are alive once the scheduler drops it, now."))
            if address in self.silent and not self._ttl_ok() and quiet >= _seconds(WORKER_TTL) \
                    and address not in self.dropped:
                self.dropped.add(address)
                self._asked(self.client._run_on_scheduler, _drop, address, f"mha-grader-silent-{self.run_id}")
        for address in [a for a in self.heard if a not in workers]:
            del self.heard[address]
            if address in self.silent:
                _say(f"Dask worker {self.silent.pop(address)} was dropped by the scheduler; its jobs went to the workers "
                     "that are alive.")

    def _held_by(self, address: str) -> list[str]:
        """The keys of this run's tasks that the scheduler has running on the worker at ``address``."""
        keys = self._asked(self.client.scheduler.processing, workers=[address]).get(address, [])
        return [k for k in keys if k in self.jobs]

    def _scheduler_ttl(self) -> float | None:
        """The scheduler's worker-ttl in seconds (None: off, or the scheduler does not say)."""
        try:
            ttl = self._asked(self.client._run_on_scheduler, _worker_ttl)
        except execute.SchedulerLost:
            raise
        except Exception:  # noqa: BLE001 - a scheduler that cannot say: the run drops silent workers itself
            return None
        return float(ttl) if ttl else None

    def _ttl_ok(self) -> bool:
        return self.ttl is not None and self.ttl <= _seconds(WORKER_TTL)

    def _asked(self, method, *args, **kwargs):
        """A call to the scheduler (``method`` a coroutine of the client's) answered within ANSWER_S, or
        SchedulerLost (and the scheduler is asked nothing more: ``self.lost``)."""
        if self.lost or self.client.status != "running":
            self.lost = True
            raise execute.SchedulerLost(self._lost())
        try:
            return self.client.sync(method, *args, callback_timeout=ANSWER_S, **kwargs)
        except (OSError, TimeoutError, CancelledError) as err:
            self.lost = True
            raise execute.SchedulerLost(self._lost() if self.client.status != "running" else
                                        f"the Dask scheduler at {self.address} did not answer within {ANSWER_S} s "
                                        f"({execute.sentence(err)}); see that it runs and is not overloaded, or "
                                        "restart it with its workers") from None

    def _lost(self) -> str:
        return (f"the Dask scheduler at {self.address} closed the connection (it stopped or was killed); start it "
                "again with its workers (see the README)")

    def in_progress(self) -> list[tuple[str, float]]:
        """(student and notebooks, since) of each task submitted and not yet given back (for the progress line)."""
        return list(self.sent.values())

    def notes(self) -> list[str]:
        """The workers that took no job because their grader is another version (also those that joined
        during the run), each with what differs."""
        return sorted(set(self.refused) | set(self._refusals()))

    def stop(self) -> int | None:
        """Submit nothing more, cancel what has not started; on the workers, stop this run's tasks (they grade
        no further notebook) and end the sandboxes they run. Returns how many sandboxes were ended (None: not
        known, the scheduler is gone or does not answer)."""
        self.waiting, self.stopped = iter(()), True
        try:
            self._asked(self.client._cancel, list(self.pending), reason="grading stopped")
            ended = self._asked(self.client._run, stop_run, self.run_id, on_error="return")
        except execute.SchedulerLost:
            return None
        return sum(n for n in ended.values() if isinstance(n, int))

    def close(self) -> None:
        """Close the client (and the LocalCluster started here), also when the scheduler is gone."""
        if not self.stopped:
            try:  # (a stopped run's stop stays set on the workers, a few bytes: a task may still be ending)
                self._asked(self.client._run, forget_run, self.run_id, on_error="return")
            except execute.SchedulerLost:
                pass
        try:
            self.client.close(timeout=1 if self.lost else ANSWER_S)
        except (OSError, TimeoutError):  # a scheduler that does not answer: the connection is simply dropped
            pass
        if self.cluster is not None:
            self.cluster.close()

    def _admit_workers(self) -> int:
        """Register the version gate (on every worker, now and later); stop if it refuses them all.
        Returns the worker threads connected now."""
        try:
            self.client.register_plugin(VersionGate(self.resource, execute.manifest()), name=PLUGIN)
        except Exception:  # noqa: BLE001 - a worker that cannot load the gate gets no resource: see _refusals
            pass
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        print(f"Dask: scheduler {self.client.scheduler.address}, {len(workers)} worker(s) with "
              f"{sum(w['nthreads'] for w in workers.values())} thread(s) (connected in "
              f"{time.monotonic() - self.started:.1f} s)" + ("; waiting for workers to join" if not workers else ""),
              file=sys.stderr, flush=True)
        self.refused = self._refusals()
        for refusal in self.refused:
            print(refusal, file=sys.stderr, flush=True)
        if workers and len(self.refused) == len(workers):
            raise execute.WrongVersion(no_worker(self.refused))
        return sum(w["nthreads"] for w in workers.values())

    def _refusals(self) -> list[str]:
        """A sentence per worker whose grader is not this one (what differs, or why it cannot say)."""
        theirs = self._asked(self.client._run, execute.manifest, on_error="return")
        return [f"Dask worker {address} takes no job: its grader is not this one ("
                + (execute.differences(m) if isinstance(m, dict) else execute.sentence(m)) + ")."
                for address, m in sorted(theirs.items())
                if not isinstance(m, dict) or execute.fingerprint(m) != execute.fingerprint()]


def no_worker(refusals: list[str], gone_for: float | None = None, last: list[str] = ()) -> str:
    """Why no job can run (WrongVersion's message, one clause): no worker runs this version (at the start), or
    none has for ``gone_for`` seconds (the ``last`` that did); the first of the ``refusals`` (sentences) says why."""
    said = ("no Dask worker runs this grader version, so nothing can be graded" if gone_for is None else
            f"no Dask worker that runs this grader version has been connected for {gone_for:.0f} s (the last: "
            f"{', '.join(last)})")
    if refusals:
        said += f"; {len(refusals)} connected worker(s) run another version, the first: {clause(refusals[0])}"
    return said + "; start workers from a checkout of this commit (see the README)"


class VersionGate(WorkerPlugin):
    """On each worker (now and as it joins): the resource the run's jobs ask for, if and only if the
    worker's own grader has the coordinator's fingerprint."""

    def __init__(self, resource: str, manifest: dict[str, str]):
        self.resource, self.manifest = resource, manifest

    async def setup(self, worker) -> None:
        mine = execute.manifest()
        if execute.fingerprint(mine) == execute.fingerprint(self.manifest):
            await worker.set_resources(**{self.resource: worker.state.nthreads})
        else:
            logging.getLogger(__name__).warning("this worker takes no job of this run: its grader differs from "
                                                "the coordinator's: %s", execute.differences(self.manifest, mine))


def _say(line: str) -> None:
    """One line on the terminal, above the progress bar (tqdm's write keeps the bar whole)."""
    from tqdm import tqdm
    tqdm.write(line, file=sys.stderr)


def _named(address: str, info: dict) -> str:
    name = info.get("name")
    return f"{address} ({name})" if name not in (None, "", address) else address


def _students(keys: list[str]) -> str:
    """The students of task keys (mha-grade/STUDENT/RUN), in words."""
    names = [k.split("/")[1] for k in keys]
    return (f"the jobs of {len(names)} student(s): " + ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            if names else "no job")


def _seconds(text: str) -> float:
    from dask.utils import parse_timedelta
    return parse_timedelta(text)


def _worker_ttl(dask_scheduler) -> float | None:
    """On the scheduler (client.run_on_scheduler): its worker-ttl in seconds, None when off."""
    return dask_scheduler.worker_ttl


async def _drop(dask_scheduler, address: str, why: str) -> str:
    """On the scheduler (client.run_on_scheduler): drop the worker at ``address``, as its own worker-ttl would
    (its tasks go to the other workers; a late result of its is then refused)."""
    return await dask_scheduler.remove_worker(address, stimulus_id=why, close=True)


def _outcome(future, timeout: float) -> dict:
    """The result of a finished task, or {"failed": sentence} (never an empty reason); TimeoutError when it could
    not be fetched within ``timeout`` seconds (its worker stopped, say)."""
    from distributed import KilledWorker
    try:
        return future.result(timeout=timeout)  # a result lost with its worker is computed again, then returned
    except TimeoutError:
        if future.status != "error":
            raise
        return {"failed": f"Dask could not run it ({execute.sentence(future.exception())})"}
    except execute.InfraError as err:
        return {"failed": f"{err}; tried {execute.RETRIES + 1} times"}
    except KilledWorker as err:
        return {"failed": f"every worker that ran it died ({execute.sentence(err)})"}
    except Exception as err:  # noqa: BLE001 - cancelled, or a failure of Dask itself
        return {"failed": f"Dask could not run it ({execute.sentence(err)})"}


def _connect(scheduler: str, workers: int):
    """(the LocalCluster started here or None, a Client connected to the scheduler)."""
    import dask
    from distributed import Client, LocalCluster

    _quiet_dask()
    if scheduler == "local":
        with dask.config.set({"distributed.scheduler.worker-ttl": WORKER_TTL}):
            cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None, preload=[__name__],
                                   env={LOCAL_WORKER: "1"})
        return cluster, Client(cluster)
    try:
        return None, Client(scheduler, timeout=f"{CONNECT_S}s")
    except (OSError, TimeoutError, ValueError) as err:
        raise execute.SchedulerLost(f"no Dask scheduler answered at {scheduler} within {CONNECT_S} s "
                                    f"({execute.sentence(err)}); start it and its workers (see the README), or "
                                    "give the right address") from None


def _quiet_dask() -> None:
    """No log lines (nor their tracebacks) from Dask in the coordinating process: what goes wrong, the run says
    in its own words (Dask's config gives some of its loggers levels of their own)."""
    for name in ["distributed", *(n for n in logging.root.manager.loggerDict if n.startswith("distributed."))]:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def dask_setup(server) -> None:
    """Called by Dask as a scheduler or worker starts with ``--preload mha_grader.trusted.cluster``: the grader is
    imported before the first job (the scheduler unpickles each task); a worker checks its sandbox,
    starts its fork servers (torch's takes seconds) and imports what feedback pages need (seconds too)
    before it takes jobs."""
    from distributed import Worker
    if not isinstance(server, Worker):
        return
    if os.environ.get(LOCAL_WORKER):  # ctrl-C in the terminal is for the run, which then stops its cluster
        os.setpgid(0, 0)
    execute.manifest()  # the version of the code this process has loaded, not of files changed later
    problems = _worker_isolation_problems()
    if problems:
        logging.getLogger(__name__).warning("the sandbox does not isolate student code on this worker; it will "
                                            "refuse every job: %s", "; ".join(problems))
    else:
        sandbox.start_servers()
    import nbconvert.filters  # noqa: F401 - feedback pages need it: seconds to import, paid here, not in the first job


def dask_teardown(server) -> None:
    """Called by Dask as a worker closes (told to, or its scheduler gone): the sandboxes it runs end now and
    no more start (their tasks come back not graded), and its fork servers end with it (a worker process
    ends without running atexit handlers)."""
    sandbox.end_all()
    sandbox.stop_servers()


def _per_student(plan: list[dict]) -> list[list[dict]]:
    """The plan's jobs grouped by student, in the plan's order."""
    groups: dict[str, list[dict]] = {}
    for job in plan:
        groups.setdefault(job["student"], []).append(job)
    return list(groups.values())


_STOPS: dict[str, threading.Event] = {}  # on a worker: run id -> set when that run stops
_STOPS_LOCK = threading.Lock()


def _stop_of(run_id: str) -> threading.Event:
    with _STOPS_LOCK:
        return _STOPS.setdefault(run_id, threading.Event())


def stop_run(run_id: str) -> int:
    """On a worker (client.run): the run's tasks grade no further notebook and start no sandbox; the
    sandboxes they run now are ended (those of other runs go on). Returns how many were ended."""
    stop = _stop_of(run_id)
    stop.set()
    return sandbox.end_all(False, of=stop)


def forget_run(run_id: str) -> None:
    """On a worker (client.run) as a run that was not stopped ends: its stop is no longer needed."""
    with _STOPS_LOCK:
        _STOPS.pop(run_id, None)


def grade_student_on_worker(releases: dict, jobs: list[dict], limits: sandbox.Limits, unsafe: bool,
                            version: str, run_id: str) -> list[dict]:
    """execute.attempt for each of one student's jobs on a worker (a result for each, in order), after
    checking that it runs grader ``version`` (the resource it was given for it says so already) and, once
    per worker process, that its sandbox isolates; it stops when run ``run_id`` does (stop_run).

    A worker whose sandbox does not isolate raises InfraError for the whole task (Dask retries it,
    perhaps elsewhere; in the end it is reported as not graded): it never grades unsandboxed.
    """
    if execute.fingerprint() != version:
        raise execute.InfraError(f"this worker runs grader version {execute.fingerprint()}, not {version}")
    if not unsafe:
        problems = _worker_isolation_problems()
        if problems:
            raise execute.InfraError("the sandbox does not isolate student code on this worker: "
                                     + "; ".join(problems))
    stop = _stop_of(run_id)
    with sandbox.stopping_with(stop):
        return [execute.attempt(releases[job["notebook"]], job, limits, unsafe, stop) for job in jobs]


@functools.cache
def _worker_isolation_problems() -> tuple[str, ...]:
    """probing.probe on this worker machine: its home folder must be hidden, Python read-only."""
    fd, canary = tempfile.mkstemp(prefix=".sandbox-canary-", dir=Path.home())
    os.close(fd)
    try:
        return tuple(probing.probe([canary], [*sandbox.python_prefixes(), "/usr"]))
    finally:
        os.unlink(canary)
