"""Grading on Dask distributed: the same jobs as the local thread pool, run by Dask workers.

    python -m mha_grader grade --scheduler local              # a LocalCluster here (W processes x 1 thread)
    python -m mha_grader grade --scheduler tcp://HOST:8786     # an existing scheduler

Other machines join a scheduler with ``dask worker tcp://HOST:8786 --nthreads 1 --nworkers N --preload
mha_grader.cluster`` run from a checkout of this repository (same commit) inside its venv, with the
repository root on PYTHONPATH (see the README); the preload imports the grader and checks the sandbox as
the worker starts, before it takes jobs. A worker runs only run.grade_job (the sandbox and the judge):
it needs no course folder, no secret and no gradebook. The hidden cases travel with each job, and the
result (plain data) comes back here, where the coordinating process alone records it.

Each student is one Dask task (all of that student's notebooks: Dask's cost per task is paid once per
student, not once per notebook), whose key names the student, what was graded and this run, so no job is
submitted twice and none is left out: the run ends only when every key has a result or has failed. A
sandbox failure of one notebook (run.InfraError) is tried again on the worker (``retries`` more times);
a task that fails as a whole (the worker's sandbox does not isolate) is retried by Dask; the task of a
worker that dies is given to another worker (Dask's allowed-failures); a job that still fails is
reported and, having no stamp, is graded by the next run.
"""
import functools
import hashlib
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from . import run, sandbox


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
        tasks, futures, run_id = {}, [], uuid.uuid4().hex[:12]  # a key of this run never meets another run's
        for student, jobs in _per_student(plan).items():
            what = hashlib.sha256("/".join(job["key"] for job in jobs).encode()).hexdigest()[:16]
            key = f"mha-grade/{student}/{what}/{run_id}"  # ids hold no "/"
            assert key not in tasks, f"{key} planned twice"
            tasks[key] = jobs
            futures.append(client.submit(grade_student_on_worker, {j["notebook"]: releases[j["notebook"]] for j in jobs},
                                         jobs, limits, args.unsafe_no_sandbox, retries, key=key, retries=retries,
                                         pure=False))
        for future in as_completed(futures):
            jobs = tasks[future.key]
            if future.status == "finished":
                outcomes = future.result()
            else:
                outcomes = [f"{type(future.exception()).__name__}: {future.exception()}"] * len(jobs)
            for job, outcome in zip(jobs, outcomes):
                if isinstance(outcome, str):  # the reason it could not be graded
                    job["error"] = outcome
                    yield job, None
                else:
                    yield job, outcome
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


def _per_student(plan: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for job in plan:
        out.setdefault(job["student"], []).append(job)
    return out


def grade_student_on_worker(releases: dict, jobs: list[dict], limits: sandbox.Limits, unsafe: bool,
                            retries: int) -> list:
    """run.grade_job for each of one student's jobs on a worker: [its result, or why it could not be
    graded (a sentence)], after checking once per worker process that its sandbox isolates.

    A worker whose sandbox does not isolate raises run.InfraError for the whole task (Dask retries it,
    perhaps elsewhere; in the end it is reported as not graded): it never grades unsandboxed.
    """
    if not unsafe:
        problems = _worker_isolation_problems()
        if problems:
            raise run.InfraError("the sandbox does not isolate student code on this worker: " + "; ".join(problems))
    return [_grade_one(releases[job["notebook"]], job, limits, unsafe, retries) for job in jobs]


def _grade_one(release, job: dict, limits: sandbox.Limits, unsafe: bool, retries: int):
    """One notebook, its sandbox failures tried again ``retries`` times: the result, or the last failure."""
    for tries in range(retries + 1):
        try:
            return run.grade_job(release, job, limits, unsafe)
        except run.InfraError as err:
            failure = f"the sandbox failed: {err}"
            time.sleep(0.5 * (tries + 1))
    return failure


@functools.cache
def _worker_isolation_problems() -> tuple[str, ...]:
    """sandbox.probe on this worker machine: its home folder must be hidden, Python read-only."""
    fd, canary = tempfile.mkstemp(prefix=".sandbox-canary-", dir=Path.home())
    os.close(fd)
    try:
        return tuple(sandbox.probe([canary], [*sandbox.python_prefixes(), "/usr"]))
    finally:
        os.unlink(canary)
