"""Grading on Dask distributed: the same jobs as the local thread pool, run by Dask workers.

    python -m mha_grader grade --scheduler local              # a LocalCluster here (W processes x 1 thread)
    python -m mha_grader grade --scheduler tcp://HOST:8786     # an existing scheduler

Other machines join a scheduler with ``dask worker tcp://HOST:8786 --nthreads 1 --nworkers N --preload
mha_grader.cluster`` run from a checkout of this repository (same commit) inside its venv, with the
repository root on PYTHONPATH (see the README); the preload imports the grader and checks the sandbox as
the worker starts, before it takes jobs. A worker runs only run.grade_job (the sandbox and the judge):
it needs no course folder, no secret and no gradebook. The hidden cases travel with each job, and the
result (plain data) comes back here, where the coordinating process alone records it.

Each job is one Dask task whose key names its (student, notebook), what was graded and this run, so no
job is submitted twice and none is left out: the run ends only when every key has a result or has failed.
A sandbox failure (run.InfraError) is retried by Dask (``retries``); the job of a worker that dies is
given to another worker (Dask's allowed-failures); a job that still fails is reported and, having no
stamp, is graded by the next run.
"""
import functools
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from . import run, sandbox

WINDOW_PER_THREAD = 4  # jobs submitted ahead per worker thread (each holds its decoded notebook)


def execute(plan: list[dict], course, args, limits: sandbox.Limits, retries: int):
    """Yield (job, result or None) as jobs finish (None: failed after ``retries`` more tries)."""
    start = time.monotonic()
    from distributed import as_completed

    cluster, client = _connect(args)
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        print(f"Dask: scheduler {client.scheduler.address}, {len(workers)} worker(s) with "
              f"{sum(w['nthreads'] for w in workers.values())} thread(s) (connected in "
              f"{time.monotonic() - start:.1f} s)" + ("; waiting for workers to join" if not workers else ""),
              file=sys.stderr, flush=True)
        releases = {name: client.scatter(release, hash=False) for name, release in course.releases.items()}
        jobs, run_id = {}, uuid.uuid4().hex[:12]  # a key of this run never meets another run's
        waiting, running = iter(plan), as_completed()

        def submit_next() -> None:
            """The next job, its notebook read just now: only a window of them is decoded at once."""
            job = next(waiting, None)
            if job is None:
                return
            key = f"mha-grade/{job['student']}/{job['notebook']}/{job['key'][:16]}/{run_id}"  # ids hold no "/"
            assert key not in jobs, f"{key} planned twice"
            jobs[key] = job
            running.add(client.submit(grade_on_worker, releases[job["notebook"]], run.loaded(job), limits,
                                      args.unsafe_no_sandbox, key=key, retries=retries, pure=False))
        for _ in range(WINDOW_PER_THREAD * max(1, sum(w["nthreads"] for w in workers.values()), args.workers)):
            submit_next()
        for future in running:
            submit_next()
            job = jobs[future.key]
            if future.status == "finished":
                yield job, future.result()
            else:
                job["error"] = f"{type(future.exception()).__name__}: {future.exception()}"
                yield job, None
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _connect(args):
    """(the LocalCluster started here or None, a Client connected to the scheduler)."""
    from distributed import Client, LocalCluster

    if args.scheduler == "local":
        cluster = LocalCluster(n_workers=max(1, args.workers), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, preload=[__name__])
        return cluster, Client(cluster)
    return None, Client(args.scheduler, timeout="30s")


def dask_setup(server) -> None:
    """Called by Dask as a scheduler or worker starts with ``--preload mha_grader.cluster``: the grader is
    imported before the first job (the scheduler unpickles each task); a worker checks its sandbox and
    starts its fork servers (torch's takes seconds) before it takes jobs."""
    from distributed import Worker
    if not isinstance(server, Worker):
        return
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


def grade_on_worker(release, job: dict, limits: sandbox.Limits, unsafe: bool) -> dict:
    """run.grade_job on a worker, after checking once per worker process that its sandbox isolates.

    A worker whose sandbox does not isolate raises run.InfraError for every job (Dask retries it,
    perhaps elsewhere; in the end it is reported as not graded): it never grades unsandboxed.
    """
    if not unsafe:
        problems = _worker_isolation_problems()
        if problems:
            raise run.InfraError("the sandbox does not isolate student code on this worker: " + "; ".join(problems))
    return run.grade_job(release, job, limits, unsafe)


@functools.cache
def _worker_isolation_problems() -> tuple[str, ...]:
    """sandbox.probe on this worker machine: its home folder must be hidden, Python read-only."""
    fd, canary = tempfile.mkstemp(prefix=".sandbox-canary-", dir=Path.home())
    os.close(fd)
    try:
        return tuple(sandbox.probe([canary], [*sandbox.python_prefixes(), "/usr"]))
    finally:
        os.unlink(canary)
