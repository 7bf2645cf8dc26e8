"""Recording results in the one coordinating process: the only serial part of a run, kept small.

A job's result arrives with its feedback already rendered where the job ran (feedback.render on
the worker). Recording one notebook here hands its stored result and its two feedback files to
FILE_THREADS thread(s) that write them (creating files is mostly the kernel's work, done there, off
the thread that records) and queues its grades. Grades are committed in batches, one commit under way at a
time on the gradebook's own thread (GradebookWriter.commit), while the next results are recorded: a
commit starts once BATCH notebooks are queued or FLUSH_S seconds have passed, and takes with it all
that is queued then, so a slow database gets larger batches, not a slower run (at most MAX_QUEUED wait;
past that, recording waits for the commit). Once a commit is done and the notebooks' files are written,
they are stamped as graded (one stamp file write per student per batch). A commit per result instead cost 2-3 ms of this
process's CPU more per notebook. :meth:`Recorder.flush` commits and stamps all that is queued; a run
calls it when no result has come for QUIET_S seconds, at its end and when it stops early, so a stop
loses at most what was not committed, which the next run grades again.
"""
import concurrent.futures as cf
import time
from collections import defaultdict, deque

from . import feedback, report

BATCH = 20        # a commit starts once this many notebooks are queued (and none is under way) ...
FLUSH_S = 1.0     # ... or this long after the last one started (a stopped run loses at most this much recording)
QUIET_S = 0.25    # ... and everything is committed once no result has come for this long
MAX_QUEUED = 2000  # notebooks queued behind a commit under way, at most: then recording waits for it
FILE_THREADS = 1  # threads that write the notebooks' files (two cost ~0.7 ms more CPU a notebook: their
#                   file creations contend in the kernel; bench_coordinator) ...
MAX_WRITING = 64  # ... with at most this many notebooks' files waiting (each holds its pages): then recording waits


class Recorder:
    def __init__(self, course, writer):
        self.course, self.writer = course, writer
        self.keys: dict[tuple[str, str], dict] = {}  # (student, notebook) -> its stamp, queued
        self.written: dict[tuple[str, str], cf.Future] = {}  # (student, notebook) -> the writing of its files
        self.files = cf.ThreadPoolExecutor(FILE_THREADS, thread_name_prefix="mha-files")
        self.writing: deque[cf.Future] = deque()  # the writings not known to be done, in order
        self.last_flush = time.monotonic()
        self.seconds, self.cpu, self.count = 0.0, 0.0, 0  # wall and CPU time spent here, notebooks recorded

    def record(self, job: dict, result: dict) -> None:
        """Files now (written by the file threads), the grades with the next commit, the stamp once both are
        done. Raises what a commit or a file write that ended meanwhile raised (of this notebook or another).
        A result "unchanged" (the bytes its stamp was made from, jobs.py) has nothing to record: its stamp,
        renewed, is written at once."""
        start, cpu = time.monotonic(), time.thread_time()
        student, name = job["student"], job["notebook"]
        if result.get("unchanged"):
            self.course.stamp(student, {name: job["stamp"]})
            return
        self.written[(student, name)] = self.files.submit(self._write, student, name, result,
                                                          result.pop("feedback"))
        self.writing.append(self.written[(student, name)])
        while self.writing and (self.writing[0].done() or len(self.writing) > MAX_WRITING):
            cf.wait([self.writing.popleft()])  # (its error, if any, is raised when it is to be stamped)
        self.writer.record(student, name, result["tests"])
        self.keys[(student, name)] = job["stamp"]
        self.count += 1
        self._stamp(self.writer.committed(wait=len(self.writer.pending) >= MAX_QUEUED))
        if len(self.writer.pending) >= BATCH or start - self.last_flush >= FLUSH_S:
            if self.writer.inflight is None:
                self.writer.commit()
                self.last_flush = start
        self.seconds += time.monotonic() - start
        self.cpu += time.thread_time() - cpu

    def flush(self, idle: bool = False) -> None:
        """Commit the queued grades, then stamp those notebooks as graded. ``idle``: no result came for a
        while; with nothing queued, the database is asked whether it still answers (see GradebookWriter)."""
        start, cpu = time.monotonic(), time.thread_time()
        self._stamp(self.writer.flush(ping=idle))
        self.last_flush = time.monotonic()
        self.seconds += self.last_flush - start
        self.cpu += time.thread_time() - cpu

    def _write(self, student: str, name: str, result: dict, rendered: dict[str, str]) -> None:
        """(In a file thread) the stored result, the feedback page and the autograded notebook."""
        report.save(self.course, student, name, result)
        feedback.write(self.course.folder("feedback", student), self.course.folder("autograded", student),
                       name, rendered)

    def _stamp(self, committed: list[tuple[str, str]]) -> None:
        """Stamp the notebooks whose grades were committed, once their files are written (one write per
        student); raises the OSError of a file that could not be written (nothing of the batch is stamped)."""
        for key in committed:
            self.written[key].result()
        per_student = defaultdict(dict)
        for student, name in committed:
            del self.written[(student, name)]
            per_student[student][name] = self.keys.pop((student, name))
        for student, stamps in per_student.items():
            self.course.stamp(student, stamps)

    def settle(self) -> None:
        """Wait until no file is being written (before what was not stamped is removed)."""
        cf.wait(list(self.written.values()))

    def close(self) -> None:
        self.files.shutdown(wait=True)

    def cost(self) -> str:
        """What recording cost this process per notebook ("12.0 ms (CPU 2.8 ms)"): wall time (waits on the disk and the database
        included; inflated by other load on the machine) and CPU time."""
        n = max(self.count, 1)
        return f"{self.seconds / n * 1000:.1f} ms (CPU {self.cpu / n * 1000:.1f} ms)"
