"""Recording results in the one coordinating process: the only serial part of a run, kept small.

A job's result arrives with its feedback already rendered where the job ran (feedback.render on
the worker). Recording one notebook here writes its stored result and its two feedback files
(plain writes) and queues its grades; every BATCH notebooks, every FLUSH_S seconds, or once no result
has come for QUIET_S seconds (the run calls :meth:`Recorder.flush` then), the queued grades are
committed in one transaction and only then are those notebooks stamped as graded (one stamp file
write per student per batch). A commit per result instead cost 2-3 ms of this process's CPU more per
notebook. :meth:`Recorder.flush` commits and stamps what is queued; a run calls it at its end and
when it stops early, so a stop loses at most the batch that was not committed, which the next run
grades again.
"""
import time
from collections import defaultdict

from . import feedback, report

BATCH = 20        # notebooks per gradebook transaction at most
FLUSH_S = 1.0     # ... or at least this often (a stopped run loses at most this much recording)
QUIET_S = 0.25    # ... or once no result has come for this long


class Recorder:
    def __init__(self, course, writer):
        self.course, self.writer = course, writer
        self.keys: dict[tuple[str, str], str] = {}  # (student, notebook) -> stamp key, queued
        self.last_flush = time.monotonic()
        self.seconds, self.cpu, self.count = 0.0, 0.0, 0  # wall and CPU time spent here, notebooks recorded

    def record(self, job: dict, result: dict) -> None:
        """Files at once; the grades and the stamp with the next batch."""
        start, cpu = time.monotonic(), time.thread_time()
        student, name = job["student"], job["notebook"]
        rendered = result.pop("feedback")
        report.save(self.course, student, name, result)
        feedback.write(self.course.folder("feedback", student), self.course.folder("autograded", student),
                       name, rendered)
        self.writer.record(student, name, result["tests"])
        self.keys[(student, name)] = job["key"]
        self.count += 1
        self.seconds += time.monotonic() - start
        self.cpu += time.thread_time() - cpu
        if len(self.keys) >= BATCH or start - self.last_flush >= FLUSH_S:
            self.flush()

    def flush(self, idle: bool = False) -> None:
        """Commit the queued grades, then stamp those notebooks as graded. ``idle``: no result came for a
        while; with nothing queued, the database is asked whether it still answers (see GradebookWriter)."""
        start, cpu = time.monotonic(), time.thread_time()
        committed = self.writer.flush(ping=idle)
        per_student = defaultdict(dict)
        for student, name in committed:
            per_student[student][name] = self.keys.pop((student, name))
        for student, stamps in per_student.items():
            self.course.stamp(student, stamps)
        self.last_flush = time.monotonic()
        self.seconds += self.last_flush - start
        self.cpu += time.thread_time() - cpu

    def cost(self) -> str:
        """What recording cost this process per notebook ("12.0 ms (CPU 2.8 ms)"): wall time (waits on the disk and the database
        included; inflated by other load on the machine) and CPU time."""
        n = max(self.count, 1)
        return f"{self.seconds / n * 1000:.1f} ms (CPU {self.cpu / n * 1000:.1f} ms)"
