"""One grading run: plan the jobs, hand them to a backend (execute.Threads here, or cluster.Dask), record
each result as it arrives, then print the summary and write the class's tables.

This is the module that plans and records; the backends execute (arrows point one way: run -> execute,
run -> cluster -> execute). A run holds the course's lock (lock.py) from start to end, and appends what
it prints to the course's grading.log (runlog.py). It refuses to start without a usable secret, or with
another secret than the one that graded the notebooks asked for (unless --new-secret). It stops when
told (stopping.py): ctrl-C (SIGINT), SIGTERM or SIGHUP while it waits (for results, the database, the
probe, planning) cancels the jobs not started and ends the running sandboxes; a signal that arrives while a
result is being recorded takes effect once that record is complete. A result that cannot be recorded
(the database is unreachable or silent, the disk is full), a Dask scheduler that went away and a
cluster left with no worker of this version stop the run the same way. Each time one line says what
happened, what to do, what was graded and the command that resumes (the one typed, passwords masked):
a notebook counts as graded only once its stamp is written, so the next run grades exactly the rest.
With --export (what `make grade` runs) a run that graded then writes grades.csv (export.py); an
export that fails is one sentence and its own exit status, every grade being recorded.
"""
import errno
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from ..walls import probing, sandbox
from . import collected, course as course_mod, execute, jobs, recording, report, runlog
from . import resume as resume_mod
from . import secret as course_secret
from .gradebook import GradebookWriter, NotReleased, Silent
from .lock import CourseLock, Held, Unwritable
from .recording import Recorder
from .stopping import Stop, Stopped
from .text import clause

EXIT_FAILED, EXIT_MISSING, EXIT_NO_ISOLATION, EXIT_LOCKED, EXIT_NOT_RECORDED, EXIT_WORKERS = 1, 2, 3, 4, 5, 6
EXIT_SCHEDULER = 7  # the Dask scheduler went away or stopped answering
EXIT_EXPORT = 8  # every grade is recorded, but `nbgrader export` did not write grades.csv (--export)
END = object()  # the backend has given back every result
YOUNG_OBJECTS = 50_000  # objects made (less those freed) between two collections of the youngest generation: at
#                        Python's 700, collections took ~4 % of this process's CPU while it graded (perf)


class NotRecorded(RuntimeError):
    """A result could not be recorded; the message is one sentence saying why."""


def grade(args, stop: Stop | None = None, resume: str = "") -> int:
    """Grade the course of ``args``; returns the exit status (the README's table). ``stop`` is installed by
    the caller (cli: before the imports) or here; ``resume`` is the command that resumes (secrets masked)."""
    resume = resume or resume_mod.command(getattr(args, "argv", None))
    if stop is None:
        stop = Stop()
        with stop.installed():
            return grade(args, stop, resume)
    try:
        key = course_secret.load()
    except course_secret.NoSecret as err:
        print(f"Grading did not start: {err}; then run again: {resume}", file=sys.stderr)
        return EXIT_MISSING
    if not Path(args.course).is_dir():
        print(f"No course folder at {args.course}: give the folder that holds exercises/ and submitted/ "
              "with --course.", file=sys.stderr)
        return EXIT_MISSING
    try:
        with CourseLock(Path(args.course).resolve(), resume) as lock, runlog.installed(lock.course, resume):
            if lock.stale_note():
                print(lock.stale_note(), file=sys.stderr)
            return _grade(args, key, stop, resume)
    except Held as err:
        print(err, file=sys.stderr)
        return EXIT_LOCKED
    except Unwritable as err:
        print(f"Grading did not start: {err}, then run again: {resume}", file=sys.stderr)
        return EXIT_NOT_RECORDED
    except Stopped:
        print(f"Stopped by {stop.name()} before grading began; nothing was recorded. Resume with: {resume}",
              file=sys.stderr)
        return stop.status()


def _grade(args, key: bytes, stop: Stop, resume: str) -> int:
    root = Path(args.course)
    if args.unsafe_no_sandbox:
        print("WARNING: --unsafe-no-sandbox: student code runs with YOUR rights, can read the solutions, the "
              "secret and the gradebook, and can change them. Never use it on real submissions.", file=sys.stderr)
    else:
        with stop.waiting():
            if not args.scheduler:  # the jobs run here: torch's server (seconds) starts while the probe runs
                report.status("starting the sandbox's fork servers")
                sandbox.start_servers()
            report.status("checking that the sandbox isolates student code (probe)")
            problems = isolation_problems(root)
        if problems:
            print("Refusing to grade: the sandbox does not isolate student code on this machine:\n  "
                  + "\n  ".join(problems) + "\n(See the README's instructor section; --unsafe-no-sandbox "
                  "exists for testing your own notebooks only.)", file=sys.stderr)
            return EXIT_NO_ISOLATION
    report.status("reading the course and planning the jobs")
    with stop.waiting():
        from . import lateness  # (it imports nbgrader, most of loading the grader: made once a run reads the course)
        course = course_mod.Course(root, args.assignment, args.db_url)
        if not course.releases:
            print(f"Grading did not start: {root / 'exercises' / args.assignment} holds no released notebook: run "
                  f"`make release` (nbgrader generate_assignment {args.assignment}) first, then run again: {resume}",
                  file=sys.stderr)
            return EXIT_MISSING
        try:
            penalties = lateness.load_penalties(course.root)
        except lateness.BadConfig as err:
            print(f"Grading did not start: {clause(err)}. Correct it (nbgrader's own commands read it too), then: "
                  f"{resume}", file=sys.stderr)
            return EXIT_MISSING
        plan, notes = jobs.plan(course, key, args)
    if plan.other_secrets and not getattr(args, "new_secret", False):
        print(f"Grading did not start: {_other_secrets(plan.other_secrets, key, getattr(args, 'argv', None))}",
              file=sys.stderr)
        return EXIT_MISSING
    late = lateness.Lateness(penalties, {s: t.at for s, t in course.timestamps.items() if not t.problem},
                             course.assignment)
    if args.force and plan:  # from here a stop leaves the rest ungraded, and the plain command grades it
        _forget(course, plan)
        resume = resume_mod.command(getattr(args, "argv", None), force=False)
    try:
        writer = GradebookWriter(course.db_url, course.assignment, stop.requested, late)
    except NotReleased as err:
        print(f"Grading did not start: {err}, then run again: {resume}", file=sys.stderr)
        return EXIT_MISSING
    except Exception as err:  # noqa: BLE001 - said in one sentence, see _not_recorded
        stop.check()  # (a stop while the database was waited for)
        print(f"Grading did not start: {_not_recorded(err, course)}. Rerun: {resume}", file=sys.stderr)
        return EXIT_NOT_RECORDED
    recorder = Recorder(course, writer)
    try:
        status = _run(args, course, plan, notes, recorder, stop, resume, jobs.Maker(course, key, args.force))
    finally:
        recorder.close()
        _close_quietly(writer)
    return _then_export(args, course, stop, status)


def _then_export(args, course, stop: Stop, status: int) -> int:
    """With --export, after a run that graded (all: 0; some notebook could not be: 1), grades.csv by `nbgrader
    export` (export.py): the run's status once written, else its failure's (the grades are all recorded: one
    sentence, and the command that exports again); without, or after any other end, ``status``."""
    if not getattr(args, "export", False) or status not in (0, EXIT_FAILED):
        return status
    again = resume_mod.command(getattr(args, "argv", None), force=False)
    report.status("writing grades.csv (nbgrader export)")
    from . import export  # (it imports nbgrader: loaded when a run exports, not when the grader loads)
    try:
        why = export.write(course.root, stop)
    except Stopped:
        print(f"Stopped by {stop.name()} while grades.csv was exported; every grade is recorded. Export again "
              f"with: {again}", file=sys.stderr)
        return stop.status()
    if why:
        print(f"Every grade is recorded, but grades.csv was not written: {why}. Export again with: {again}",
              file=sys.stderr)
        return EXIT_EXPORT
    print(f"Exported the gradebook to {export.NAME} (nbgrader export).")
    return status


def _other_secrets(others: dict[str, int], key: bytes, argv: list[str] | None) -> str:
    """Why a run refuses notebooks graded with another secret, and the two ways on (``argv``: as typed)."""
    ranked = sorted(others.items(), key=lambda kv: -kv[1])
    shown = (f"fingerprint {ranked[0][0]}" if len(ranked) == 1 else
             "fingerprints " + ", ".join(f"{fp} ({n})" for fp, n in ranked))
    return (f"the course secret changed: {sum(others.values())} of the notebooks asked for were graded with another "
            f"secret ({shown}), not with {course_secret.path()} (fingerprint {course_secret.fingerprint(key)}). "
            f"Graded again with this one, each would get other hidden inputs, and maybe another grade. If the secret "
            f"was replaced by mistake, point ${course_secret.ENV} at the file of the one that graded them and run "
            f"again: {resume_mod.command(argv)}; if on purpose, grade them again with this one: "
            f"{resume_mod.command(argv, add=('--new-secret',))}")


def _run(args, course, plan: list[dict], notes: list[str], recorder: Recorder, stop: Stop, resume: str,
         make: jobs.Maker) -> int:
    """Execute the plan (each record's job made by ``make`` when its turn comes), recording each result as it
    arrives; stop cleanly when told or when recording fails."""
    limits = sandbox.Limits(test_s=args.test_seconds, notebook_s=args.notebook_seconds)
    results, failed, unchanged = [], [], 0
    progress = report.Progress(len(plan), "Dask" if args.scheduler else f"{max(1, args.workers)} worker(s)")
    backend = None
    try:
        with stop.waiting():
            backend = _backend(args, course, limits)
            gc.freeze()  # start-up's objects (torch's, the plan's) live to the end: no collection walks them again
            gc.set_threshold(YOUNG_OBJECTS)  # (a notebook's judging makes thousands of short-lived objects)
            backend.start(plan, make)
            progress.watch(backend.in_progress)
        arrivals = backend.results(recording.QUIET_S)
        while True:
            with stop.waiting():
                arrival = next(arrivals, END)
            if arrival is END:
                break
            if arrival is None:  # no result for a while: commit and stamp what is queued (or see the database answers)
                _flush_or_stop(course, recorder, stop, idle=True)
                stop.check()
                continue
            job, result = arrival
            if "failed" not in result:
                if job.get("notes"):  # (kept with the result: notes.csv describes the class, whichever run graded it)
                    result["class_notes"] = job["notes"]
                result = _record_or_stop(course, recorder, job, result, stop)
            if "failed" in result:
                job["error"] = result["failed"]
                failed.append(job)
            elif result.get("unchanged"):  # the bytes its stamp was made from: only the stamp was renewed
                unchanged += 1
            else:
                results.append((job, _kept(result)))
            progress.step()
            stop.check()
        _flush_or_stop(course, recorder, stop)
        notes += backend.notes()
        standing = _standing_or_stop(course, recorder.writer, stop)
    except Stopped:
        _flush_quietly(course, recorder, results)  # what was graded is committed, then stamped
        _stopped(backend, progress, f"Stopped by {stop.name()}", results, plan, resume)
        backend = None
        return stop.status()
    except (NotRecorded, execute.WrongVersion, execute.SchedulerLost) as err:
        _flush_quietly(course, recorder, results, say=not isinstance(err, NotRecorded))
        _stopped(backend, progress, f"Grading stopped: {err}", results, plan, resume)
        backend = None
        return {NotRecorded: EXIT_NOT_RECORDED, execute.WrongVersion: EXIT_WORKERS,
                execute.SchedulerLost: EXIT_SCHEDULER}[type(err)]
    finally:
        if backend is not None:
            if len(results) + len(failed) + unchanged < len(plan):  # an unexpected error: nothing keeps running
                backend.stop()
            backend.close()
    progress.done()
    changed = jobs.changed_during_run(course, results)
    notes += jobs.notes_after(results, failed, changed)
    failed += [{"student": s, "notebook": course.assignment, "error": t.problem} for s, t in course.timestamps.items()
               if t.problem]  # (planning gave them no job: their timestamp.txt is not usable)
    failed += [{"student": s, "notebook": n, "error": why} for s, n, why in recorder.writer.lateness.problems]
    seconds = progress.elapsed()
    try:
        with stop.waiting():  # (reading a large class's stored results takes a while)
            notes += _publish_collect_files(course, failed, changed)
            report.summary(course, results, failed, notes, standing=standing)
    except Stopped:
        print(f"Stopped by {stop.name()} while the class's tables were written; every grade is recorded. Write the "
              f"tables again with: {resume}", file=sys.stderr)
        return stop.status()
    except OSError as err:
        print(f"The summary was not written: {_not_recorded(err, course)}. Every grade is recorded; rerun to "
              f"write the tables: {resume}", file=sys.stderr)
        return EXIT_NOT_RECORDED
    if results:
        print(f"Grading took {seconds:.1f} s for {len(plan)} notebook(s).")
    if results and getattr(args, "timing", False):  # recording is the one serial part of a run: this process must keep up
        print(f"Recording took {recorder.seconds:.1f} s. Per notebook in this process: recording {recorder.cost()}; "
              f"all its CPU {_own_cpu() / len(results) * 1000:.1f} ms.")
    return EXIT_FAILED if failed else 0


def _standing_or_stop(course, writer, stop: Stop):
    """The late policy applied to the whole class (GradebookWriter.standing); raises NotRecorded as a commit does."""
    writer.lateness.problems.clear()  # (this pass meets every late notebook: its problems are the run's)
    try:
        return writer.standing()
    except (DBAPIError, Silent) as err:
        stop.check()
        raise NotRecorded(_not_recorded(err, course)) from err


def _publish_collect_files(course, failed: list, changed: list) -> list[str]:
    """nbgrader's collect files beside each student's pages (collected.publish), for every student whose
    submission is graded as it is now: the timestamp.txt read by planning is still there and none of their
    notebooks failed or was handed in again during the run (those keep the files they had until the run
    that grades them). Returns the notes."""
    stale = {job["student"] for job in failed + changed}
    notes = []
    for student, read in course.timestamps.items():
        submitted = course.folder("submitted", student)
        if read.problem or student in stale or collected.read_timestamp(submitted) != read:
            continue
        note = collected.publish(submitted, read, [course.folder("feedback", student),
                                                   course.folder("autograded", student)])
        notes += [note] if note else []
    return notes


def _kept(result: dict) -> dict:
    """What the run keeps of a recorded result until its end (the result itself is on disk): a class's worth
    of whole results would grow the coordinator's memory with the class."""
    return {"status": result.get("status"), "notes": result.get("notes", [])}


def _own_cpu() -> float:
    """CPU seconds of this process alone (not the sandboxes it forks)."""
    times = os.times()
    return times.user + times.system


def _backend(args, course, limits: sandbox.Limits):
    if args.scheduler:
        from . import cluster
        return cluster.Dask(args.scheduler, args.workers, course.releases, limits, args.unsafe_no_sandbox)
    return execute.Threads(course.releases, args.workers, limits, args.unsafe_no_sandbox)


def _stopped(backend, progress, why: str, results: list, plan: list[dict], resume: str) -> None:
    """End the jobs, then the one line: what was graded, and how to resume."""
    running = backend.stop() if backend is not None else 0
    if backend is not None:
        backend.close()
    progress.done()
    left = len(plan) - len(results)
    ended = ("the workers could not be told through the scheduler: each ends what it runs as it loses the "
             "scheduler, or at the time limit" if running is None else "none of them was running" if not running
             else f"of them {running} were running and were ended")
    print(f"{clause(why)}. This run graded and recorded {len(results)} of {len(plan)} notebook(s); "
          f"{left} were not ({ended}; nothing half-done is kept). Resume with: {resume}", file=sys.stderr, flush=True)


def _record_or_stop(course, recorder: Recorder, job: dict, result: dict, stop: Stop) -> dict:
    """Record ``result``; raises NotRecorded when the gradebook or the disk fails (the run stops), and
    turns any other error (a bug, on this notebook's data) into this notebook's failure: the run goes on."""
    try:
        recorder.record(job, result)  # files now; grades and stamp with its batch
    except (OSError, DBAPIError, Silent) as err:
        recorder.settle()
        _unrecord(course, job)
        stop.check()  # a stop asked for while the database was waited for: it ends the run, not the database
        raise NotRecorded(_not_recorded(err, course)) from err
    except Exception as err:  # noqa: BLE001 - not stamped: the next run grades it again
        recorder.settle()
        _unrecord(course, job)
        return {"failed": f"its result could not be recorded ({execute.sentence(err)}); this is a bug in the grader"}
    return result


def _unrecord(course, job: dict) -> None:
    """Remove what a failed record wrote before the stamp (a result file, a page cut short): nobody reads a
    half-done record; its grades, already committed, are the ones the next run writes again."""
    student, name = job["student"], job["notebook"]
    for path in (report.result_path(course, student, name), course.folder("feedback", student) / f"{name}.html",
                 course.folder("autograded", student) / f"{name}.ipynb"):
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def _flush_or_stop(course, recorder: Recorder, stop: Stop | None = None, idle: bool = False) -> None:
    """Commit the last batch; raises NotRecorded when the gradebook or the disk fails (Stopped when a stop
    was asked for while the database was waited for)."""
    try:
        recorder.flush(idle)
    except (OSError, DBAPIError, Silent) as err:
        if stop is not None:
            stop.check()
        raise NotRecorded(_not_recorded(err, course)) from err


def _flush_quietly(course, recorder: Recorder, results: list, say: bool = True) -> None:
    """On a stop: commit what was graded; what cannot be committed leaves no file behind (graded again)
    and leaves ``results``. ``say``: print why it could not be committed (not when that is why the run stops)."""
    try:  # (after a stop, the database gets STOP_GRACE_S to answer: see GradebookWriter)
        _flush_or_stop(course, recorder)
    except NotRecorded as err:
        if say:
            print(f"The last results were not recorded: {clause(err)}; the next run grades them again.", file=sys.stderr)
    recorder.settle()
    lost = set(recorder.keys)  # queued, never committed: nobody reads a half-done record
    for student, name in lost:
        _unrecord(course, {"student": student, "notebook": name})
    recorder.keys.clear()
    results[:] = [(job, result) for job, result in results if (job["student"], job["notebook"]) not in lost]


def _not_recorded(err: BaseException, course) -> str:
    """Why a result could not be recorded, as one plain sentence (no traceback)."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk that holds {err.filename or _fullest(course)} is full"
    if isinstance(err, OSError):
        return f"{err.filename or 'a file of the course'} could not be written ({err.strerror or err})"
    if isinstance(err, Silent):
        return (f"the gradebook database {_shown(course.db_url)} stopped answering ({err}: the server is frozen "
                "or overloaded); check it")
    if isinstance(err, DBAPIError):
        first = clause(str(err.orig).strip().splitlines()[0]) if str(err.orig).strip() else type(err.orig).__name__
        return f"the gradebook database {_shown(course.db_url)} is unreachable or refused the write ({first})"
    return f"recording failed ({execute.sentence(err)})"


def _shown(db_url: str) -> str:
    """A database URL as it may be printed: its password masked."""
    from sqlalchemy.engine import make_url
    return make_url(db_url).render_as_string(hide_password=True)


def _fullest(course) -> Path:
    """Of the folders a run writes to, the one with the least room left (a write that filled its disk)."""
    folders = [f for f in (course.root / "feedback", course.root / "autograded", course.root) if f.is_dir()]
    return min(folders, key=lambda f: shutil.disk_usage(f).free)


def _close_quietly(writer) -> None:
    """Close the gradebook; a database that went away is already reported."""
    try:
        writer.close()
    except Exception:  # noqa: BLE001 - nothing left to save
        pass


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
        return probing.probe(private + canaries + [str(course_secret.path())], [*sandbox.python_prefixes(), "/usr"])
    finally:
        for name in canaries:
            os.unlink(name)


def _forget(course, plan: list[dict]) -> None:
    """A --force run's notebooks count as not graded from now on (their stamps go; their grades and pages stay
    until replaced), so that a run stopped half way is finished by the command without --force."""
    by_student: dict[str, list[str]] = {}
    for job in plan:
        by_student.setdefault(job["student"], []).append(job["notebook"])
    for student, names in by_student.items():
        course.unstamp(student, names)

