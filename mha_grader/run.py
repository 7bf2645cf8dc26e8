"""One grading run: plan the jobs, run them on W workers (threads here, or Dask), record each
result as it arrives, then print the summary and write the class's tables."""
import concurrent.futures as cf
import os
import sys
import tempfile
import time
from pathlib import Path

from mha_checks.hidden import hidden_cases

from . import course as course_mod, feedback, judging, report, sandbox
from . import secret as course_secret
from .gradebook import GradebookWriter
from .recording import Recorder

RETRIES = 2


class InfraError(RuntimeError):
    """The sandbox itself failed (not the student's code): the job is tried again."""


def grade(args) -> int:
    try:
        key = course_secret.load()
    except course_secret.NoSecret as err:
        print(err, file=sys.stderr)
        return 2
    root = Path(args.course)
    if args.unsafe_no_sandbox:
        print("WARNING: --unsafe-no-sandbox: student code runs with YOUR rights, can read the solutions, the "
              "secret and the gradebook, and can change them. Never use it on real submissions.", file=sys.stderr)
    else:
        if not args.scheduler:  # the jobs run here: torch's server (seconds) starts while the probe runs
            report.status("starting the sandbox's fork servers")
            sandbox.start_servers()
        report.status("checking that the sandbox isolates student code (probe)")
        problems = isolation_problems(root)
        if problems:
            print("Refusing to grade: the sandbox does not isolate student code on this machine:\n  "
                  + "\n  ".join(problems) + "\n(See the README's instructor section; --unsafe-no-sandbox "
                  "exists for testing your own notebooks only.)", file=sys.stderr)
            return 3
    report.status("reading the course and planning the jobs")
    course = course_mod.Course(root, args.assignment, args.db_url)
    plan, notes = _plan(course, key, args)
    writer = GradebookWriter(course.db_url, course.assignment)
    recorder = Recorder(course, writer)
    results, failed = [], []
    progress = report.Progress(len(plan), "Dask" if args.scheduler else f"{max(1, args.workers)} worker(s)")
    try:
        for job, result in _execute(plan, args, course, key):
            if result is None:
                failed.append(job)
            else:
                recorder.record(job, result)
                results.append((job, result))
            progress.step()
    finally:
        try:
            recorder.flush()  # at the end and on a stop: what was graded is committed, then stamped
        finally:
            writer.close()
            progress.done()
    seconds = progress.elapsed()
    report.summary(course, results, failed, notes)
    if results:  # recording is the one serial part of a run: with many workers, this process must keep up
        print(f"Grading took {seconds:.1f} s for {len(plan)} notebook(s); recording {recorder.seconds:.1f} s.\n"
              f"Per notebook in this process: recording {recorder.cost()}; all its CPU "
              f"{_own_cpu() / len(results) * 1000:.1f} ms.")
    return 1 if failed else 0


def _own_cpu() -> float:
    """CPU seconds of this process alone (not the sandboxes it forks)."""
    times = os.times()
    return times.user + times.system


def isolation_problems(course: Path) -> list[str]:
    """What the sandbox fails to hide or protect here (empty: grading may start)."""
    course = course.resolve()
    canaries = []
    for folder in (course, Path.home()):
        fd, name = tempfile.mkstemp(prefix=".sandbox-canary-", dir=folder)
        os.close(fd)
        canaries.append(name)
    private = [str(course / p) for p in ("solutions", "submitted", "nbgrader_config.py", "gradebook.db")]
    try:
        return sandbox.probe(private + canaries + [str(course_secret.path())], [*sandbox.python_prefixes(), "/usr"])
    finally:
        for name in canaries:
            os.unlink(name)


def _plan(course, key: bytes, args) -> tuple[list[dict], list[str]]:
    """The (student, notebook) jobs still to grade: new, changed, or all with --force."""
    fingerprint = course_secret.fingerprint(key)
    students, notes = course.students()
    students = [s for s in students if not args.student or s in args.student]
    notes += [f"{s}: no submission folder" for s in args.student if s not in students]
    plan = []
    for student in students:
        files, extra = course.submission(student)
        notes += [f"{student}: {n}" for n in extra]
        stamps = course.stamps(student)
        for name, path in files.items():
            if args.notebook and name not in args.notebook:
                continue
            nb, digest, reason = course_mod.notebooks.read_submission(path) if path else (None, "", "was not handed in")
            job_key = course.key(digest or reason, fingerprint)
            if stamps.get(name) == job_key and not args.force:
                continue
            plan.append({"student": student, "notebook": name, "nb": nb, "reason": reason, "key": job_key,
                         "cases": {g.id: hidden_cases(g.id, course_secret.rng(key, course.assignment, name, g.id))
                                   for g in course.releases[name].grade_cells}})
    return plan, notes


def grade_job(release, job: dict, limits: sandbox.Limits, unsafe: bool) -> dict:
    """One notebook, on any worker. Raises InfraError when the sandbox failed (Dask retries it)."""
    result = judging.grade_notebook(release, job["nb"], job["reason"], job["cases"], limits, unsafe)
    if result["status"] == "infra":
        raise InfraError("; ".join(result["notes"]) or "the sandbox returned nothing")
    result["feedback"] = feedback.render(release, job["nb"], result, job["student"])  # here, not where it is recorded
    return result


def _execute(plan: list[dict], args, course, key):
    """Yield (job, result or None) as jobs finish; infrastructure failures are retried."""
    limits = sandbox.Limits(test_s=args.test_seconds, test_cpu_s=max(1, int(args.test_seconds)),
                            notebook_s=args.notebook_seconds)
    unsafe = args.unsafe_no_sandbox
    if args.scheduler:
        from . import cluster
        yield from cluster.execute(plan, course, args, limits, RETRIES)
        return
    with cf.ThreadPoolExecutor(max(1, args.workers)) as pool:
        def attempt(job):
            for tries in range(RETRIES + 1):
                try:
                    return grade_job(course.releases[job["notebook"]], job, limits, unsafe)
                except Exception as err:  # noqa: BLE001 - the sandbox or a grader bug: retried, then reported
                    job["error"] = f"{type(err).__name__}: {err}"
                    time.sleep(0.5 * (tries + 1))
                except Exception as err:  # noqa: BLE001 - a grader bug: reported, the batch goes on
                    job["error"] = f"{type(err).__name__}: {err}"
                    return None
            return None
        futures = {pool.submit(attempt, job): job for job in plan}
        for future in cf.as_completed(futures):
            yield futures[future], future.result()

