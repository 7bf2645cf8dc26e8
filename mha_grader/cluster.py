"""Grading on Dask distributed: the same jobs as the local threads (execute.Threads), run by Dask workers.

    python -m mha_grader grade --scheduler local              # a LocalCluster here (W processes x 1 thread)
    python -m mha_grader grade --scheduler tcp://HOST:8786     # an existing scheduler

Other machines join a scheduler with ``dask worker tcp://HOST:8786 --nthreads 1 --nworkers N --preload
mha_grader.cluster`` run from a checkout of this repository (same commit) inside its venv, with the
repository root on PYTHONPATH (see the README); the preload imports the grader and checks the sandbox as
the worker starts, before it takes jobs. A worker runs only execute.grade_job (the sandbox and the judge):
it needs no course folder, no secret and no gradebook. The hidden cases travel with each job, and the
result (plain data) comes back to the coordinating process, which alone records it.

One grader version per run: every job asks for a Dask resource named after the coordinator's
fingerprint (execute.fingerprint: the grader's and the checks' source, the packages they rest on). A
worker plugin gives that resource only to a worker whose own fingerprint is the same, now or when it
joins later, so a worker at another version never receives a job; the run says which worker and why.

Each job is one Dask task whose key names its (student, notebook), what was graded and this run, so no
job is submitted twice and none is left out. A sandbox failure (InfraError) is retried by Dask
(``retries``); the job of a worker that dies is given to another worker (Dask's allowed-failures), and
a result lost with its worker before it was fetched is computed again.
"""
import functools
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from distributed import WorkerPlugin

from . import execute, sandbox

PLUGIN = "mha-grader-version"
LOCAL_WORKER = "MHA_GRADER_LOCAL_WORKER"  # set for the workers of a LocalCluster started by a grading run

WINDOW_PER_THREAD = 4  # jobs submitted ahead per worker thread (each holds its decoded notebook)


class Dask:
    """The jobs of a run as Dask tasks, on a LocalCluster started here or an existing scheduler."""

    def __init__(self, scheduler: str, workers: int, releases: dict, limits: sandbox.Limits, unsafe: bool):
        self.releases, self.limits, self.unsafe, self.workers = releases, limits, unsafe, workers
        self.started = time.monotonic()
        self.cluster, self.client = _connect(scheduler, workers)
        self.resource = f"mha-grader-{execute.fingerprint()}"
        self.jobs: dict = {}
        self.pending: set = set()  # submitted, not yet given back
        self.waiting = iter(())
        self.refused: list[str] = []

    def start(self, plan: list[dict]) -> None:
        """Submit the first window of jobs (after the version check: see notes())."""
        from distributed import as_completed
        threads = self._admit_workers()
        self.run_id = uuid.uuid4().hex[:12]  # a key of this run never meets another run's
        # Each release is a task, not scattered data: a copy lost with its worker is computed again.
        self.release_tasks = {name: self.client.submit(_same, release, key=f"mha-release/{name}/{self.run_id}",
                                                       pure=False, resources={self.resource: 1})
                              for name, release in self.releases.items()}
        self.waiting, self.running = iter(plan), as_completed()
        for _ in range(WINDOW_PER_THREAD * max(1, threads, self.workers)):
            self._submit_next()

    def _submit_next(self) -> None:
        """The next job, its notebook read just now: only a window of them is decoded at once."""
        job = next(self.waiting, None)
        if job is None:
            return
        key = f"mha-grade/{job['student']}/{job['notebook']}/{job['key'][:16]}/{self.run_id}"  # ids hold no "/"
        assert key not in self.jobs, f"{key} planned twice"
        self.jobs[key] = job
        future = self.client.submit(grade_on_worker, self.release_tasks[job["notebook"]], execute.loaded(job),
                                    self.limits, self.unsafe, execute.fingerprint(), key=key, pure=False,
                                    retries=execute.RETRIES, resources={self.resource: 1})
        self.pending.add(future)
        self.running.add(future)

    def results(self):
        """(job, result) as jobs finish; each one done lets the next in."""
        for future in self.running:
            self._submit_next()
            yield self.jobs[future.key], _outcome(future)
            self.pending.discard(future)
            future.release()

    def idle(self) -> bool:
        """No result is waiting to be given back (the coordinator may do its batched work now)."""
        return not self.running.has_ready()

    def notes(self) -> list[str]:
        """The workers that took no job because their grader is another version (also those that joined
        during the run), each with what differs."""
        return sorted(set(self.refused) | set(self._refusals()))

    def stop(self) -> int:
        """Submit nothing more, cancel what has not started; end the sandboxes the workers run for us."""
        self.waiting = iter(())
        self.client.cancel(list(self.pending), reason="grading stopped")
        ended = self.client.run(sandbox.end_all, False, on_error="return")
        return sum(n for n in ended.values() if isinstance(n, int))

    def close(self) -> None:
        self.client.close()
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
            raise execute.WrongVersion("No Dask worker runs this grader version, so nothing can be graded:\n  "
                                       + "\n  ".join(self.refused))
        return sum(w["nthreads"] for w in workers.values())

    def _refusals(self) -> list[str]:
        """A sentence per worker whose grader is not this one (what differs, or why it cannot say)."""
        theirs = self.client.run(execute.manifest, on_error="return")
        return [f"Dask worker {address} takes no job: its grader is not this one ("
                + (execute.differences(m) if isinstance(m, dict) else execute.sentence(m)) + ")."
                for address, m in sorted(theirs.items())
                if not isinstance(m, dict) or execute.fingerprint(m) != execute.fingerprint()]


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


def _same(release):
    return release


def _outcome(future) -> dict:
    """The result of a finished task, or {"failed": sentence} (never an empty reason)."""
    from distributed import KilledWorker
    try:
        return future.result()  # a result lost with its worker is computed again, then returned
    except execute.InfraError as err:
        return {"failed": f"{err}; tried {execute.RETRIES + 1} times"}
    except KilledWorker as err:
        return {"failed": f"every worker that ran it died ({execute.sentence(err)})"}
    except Exception as err:  # noqa: BLE001 - cancelled, or a failure of Dask itself
        return {"failed": f"Dask could not run it ({execute.sentence(err)})"}


def _connect(scheduler: str, workers: int):
    """(the LocalCluster started here or None, a Client connected to the scheduler)."""
    from distributed import Client, LocalCluster

    if scheduler == "local":
        cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, preload=[__name__],
                               env={LOCAL_WORKER: "1"})
        return cluster, Client(cluster)
    return None, Client(scheduler, timeout="30s")


def dask_setup(server) -> None:
    """Called by Dask as a scheduler or worker starts with ``--preload mha_grader.cluster``: the grader is
    imported before the first job (the scheduler unpickles each task); a worker checks its sandbox and
    starts its fork servers (torch's takes seconds) before it takes jobs."""
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


def dask_teardown(server) -> None:
    """Called by Dask as a worker closes: its sandbox fork server ends with it, after its last job
    (a worker process ends without running atexit handlers)."""
    sandbox.stop_servers()


def grade_on_worker(release, job: dict, limits: sandbox.Limits, unsafe: bool, version: str) -> dict:
    """execute.grade_job on a worker, after checking that it runs grader ``version`` (the resource it
    was given for it says so already) and, once per worker process, that its sandbox isolates.

    A worker whose sandbox does not isolate raises InfraError for every job (Dask retries it,
    perhaps elsewhere; in the end it is reported as not graded): it never grades unsandboxed.
    """
    if execute.fingerprint() != version:
        raise execute.InfraError(f"this worker runs grader version {execute.fingerprint()}, not {version}")
    if not unsafe:
        problems = _worker_isolation_problems()
        if problems:
            raise execute.InfraError("the sandbox does not isolate student code on this worker: "
                                     + "; ".join(problems))
    return execute.grade_job(release, job, limits, unsafe)


@functools.cache
def _worker_isolation_problems() -> tuple[str, ...]:
    """sandbox.probe on this worker machine: its home folder must be hidden, Python read-only."""
    fd, canary = tempfile.mkstemp(prefix=".sandbox-canary-", dir=Path.home())
    os.close(fd)
    try:
        return tuple(sandbox.probe([canary], [*sandbox.python_prefixes(), "/usr"]))
    finally:
        os.unlink(canary)
