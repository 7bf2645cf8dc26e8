"""Grades into nbgrader's own gradebook (formgrader and `nbgrader export` keep working).

Writes are batched: :meth:`GradebookWriter.record` queues one notebook's scores; :meth:`commit` starts
committing what is queued (MAX_BATCH notebooks at most, LOCAL_MAX_BATCH in sqlite) in one transaction,
one commit under way at a time, and :meth:`committed` says when it is done; :meth:`flush` commits all
that is queued and waits.
A notebook counts as graded only once its batch is committed (the caller stamps it then), so a run
stopped between two commits loses nothing but what was not committed, which the next run grades again.
:meth:`close` commits nothing.

A database that stops answering cannot hold the run: every call to it is made by a thread of the
writer's own, and the caller gives up once that thread has gone ANSWER_S seconds on end without working
(a frozen server accepts connections and answers nothing, and a blocked read ignores signals). Working
is spending PROGRESS_CPU_S on the CPU within the last PROGRESS_WINDOW_S (since the last look, when that
was longer ago): a call slowed by a loaded machine still works, one waiting for an answer does not,
though its driver wakes to poll (psycopg every 0.1 s, at ~1.5 ms of CPU a second). A sqlite file, with
no server to freeze, gets LOCAL_ANSWER_S for its disk's stalls. A stop (ctrl-C) gives a call in progress STOP_GRACE_S more. A call given up on leaves its
connection as it is (:class:`Silent`): nothing more is sent on it, and the batch it held is not stamped.
PostgreSQL also gets connect, statement and lock timeouts (a server that answers cancels what takes too
long and releases its locks), sqlite a busy timeout.
"""
import collections
import functools
import os
import queue
import threading
import time

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError


ANSWER_S = 3.0  # how long the gradebook's thread may wait on a database server without working, within one call
LOCAL_ANSWER_S = 30.0  # ... on a sqlite file (no server to freeze: the disk's own stalls are waited out)
PROGRESS_CPU_S = 0.025  # the CPU it must spend within the last PROGRESS_WINDOW_S to count as working (5 % of a core;
PROGRESS_WINDOW_S = 0.5  # a wait on a frozen server polls at ~1.5 ms of CPU a second: psycopg, measured, 3.4 at most)
MAX_CALL_S = 60.0  # the longest one call may take, working or not
STOP_GRACE_S = 1.0  # once a stop is asked for, how much longer a call in progress may take
POLL_S = 0.05
CONNECT_S, STATEMENT_MS, LOCK_MS = 2, 2500, 2000  # PostgreSQL's own limits, inside ANSWER_S
PING_S = 1.0  # while nothing is committed, an idle run still asks the database (SELECT 1) this often
MAX_BATCH = 500  # notebooks in one transaction at most (a server's work for one stays well inside ANSWER_S) ...
LOCAL_MAX_BATCH = 2000  # ... in a sqlite file's (a commit's cost there is mostly its fsync, whatever its size)


class Silent(RuntimeError):
    """The gradebook database did not answer in time; the message says how long was waited."""


class NotReleased(RuntimeError):
    """The gradebook has no such assignment (nbgrader generate_assignment was not run); one clause."""


class GradebookWriter:
    """One open gradebook for a run; only the process that records results uses it. ``interrupted`` (a
    stop was asked for) is looked at while a call to the database is waited for."""

    def __init__(self, db_url: str, assignment: str, interrupted=lambda: False, lateness=None):
        self.interrupted, self.silent, self.answered_at = interrupted, "", time.monotonic()
        self.lateness = lateness  # lateness.Lateness: each batch's times and late penalties go with its grades
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        thread = threading.Thread(target=_answer, args=(self.calls,), daemon=True, name="mha-gradebook")
        thread.start()
        self.clock = time.pthread_getcpuclockid(thread.ident)  # the CPU time of that thread alone
        db_url = with_timeouts(db_url)
        local = make_url(db_url).get_backend_name() == "sqlite"
        self.patience, self.max_batch = (LOCAL_ANSWER_S, LOCAL_MAX_BATCH) if local else (ANSWER_S, MAX_BATCH)
        course_id = self._answered(_released_under, db_url, assignment)
        if course_id is None:
            raise NotReleased(f"The gradebook {make_url(db_url).render_as_string(hide_password=True)} has no "
                              f"assignment {assignment!r}: run `make release` (nbgrader generate_assignment) first")
        from nbgrader.api import Gradebook  # (nbgrader's import is most of loading the grader: made when a run opens it)
        self.gb = self._answered(Gradebook, db_url, course_id)  # nbgrader's default id would add a stray course row
        self._answered(_add_indexes, self.gb)
        self.assignment = assignment
        self.pending: list[tuple[str, str, list[dict]]] = []
        self.inflight: _Call | None = None  # the commit under way

    def _answered(self, call, *args):
        """``call(*args)`` on the writer's database thread (nbgrader's session is per thread), waited for: its
        value, or its exception, or Silent (see _wait)."""
        return self._wait(self._ask(call, *args))

    def _ask(self, call, *args) -> "_Call":
        """``call(*args)`` handed to the database thread, not waited for."""
        if self.silent:
            raise Silent(self.silent)
        asked = _Call(call, args, time.clock_gettime(self.clock))
        self.calls.put(asked)
        return asked

    def _wait(self, asked: "_Call", block: bool = True):
        """The value of a call handed to the database thread (its exception raised), waited for (without
        ``block``, None while it runs); Silent once the thread has waited ``self.patience`` seconds on end without
        working (see the module), the call has run MAX_CALL_S, or STOP_GRACE_S after a stop was asked for. A
        call given up on still holds the connection: nothing more is sent on it."""
        while not asked.done.wait(POLL_S if block else 0):
            now, cpu = time.monotonic(), time.clock_gettime(self.clock)
            while len(asked.looks) > 1 and now - asked.looks[1][0] >= PROGRESS_WINDOW_S:
                asked.looks.popleft()  # (the first look left is the newest that is a window old, if any is)
            then, spent = asked.looks[0]
            if now - then >= PROGRESS_WINDOW_S and cpu - spent >= PROGRESS_CPU_S:
                asked.working = now
            asked.looks.append((now, cpu))
            if self.interrupted():
                asked.stop_by = min(asked.stop_by, now + STOP_GRACE_S)
            if now >= min(asked.working + self.patience, asked.start + MAX_CALL_S, asked.stop_by):
                self.silent = f"no answer within {now - asked.start:.0f} s"
                raise Silent(self.silent)
            if not block:
                return None
        self.answered_at = time.monotonic()
        if "error" in asked.box:
            raise asked.box["error"]
        return asked.box.get("value")

    def record(self, student: str, notebook: str, tests: list[dict]) -> None:
        """Queue the auto scores of one notebook (committed by the next :meth:`commit` or :meth:`flush`)."""
        self.pending.append((student, notebook, tests))

    def commit(self) -> None:
        """Start committing the queued notebooks (``max_batch`` at most) in one transaction, on the database thread,
        unless a commit is under way (one at a time: what is queued meanwhile goes with the next). See
        :meth:`committed`."""
        if self.inflight is None and self.pending:
            batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
            self.inflight = self._ask(self._commit, batch)

    def committed(self, wait: bool = False) -> list[tuple[str, str]]:
        """The (student, notebook) of the commit under way once it is done ([] while it runs, unless ``wait``);
        raises what the commit raised, or Silent."""
        if self.inflight is None:
            return []
        done = self._wait(self.inflight, block=wait)
        if done is None:
            return []
        self.inflight = None
        return done

    def flush(self, ping: bool = False) -> list[tuple[str, str]]:
        """Commit every queued notebook (and wait for the commit under way); returns their (student,
        notebook). With nothing to commit and ``ping``, ask the database whether it answers, at most every
        PING_S (raises as a commit would)."""
        if self.inflight is None and not self.pending:
            if ping and time.monotonic() - self.answered_at >= PING_S:
                self._answered(self._ping)
            return []
        done = self.committed(wait=True)
        while self.pending:
            self.commit()
            done += self.committed(wait=True)
        return done

    def standing(self):
        """Apply the late policy to the whole class and commit (lateness.py: a due date, an extension or the policy
        may have changed, a submission's time too with bytes that did not); the class's lateness.ClassStanding,
        with each student's lms_user_id. Raises as a commit would."""
        return self._answered(self._standing)

    def _standing(self):
        """(On the database thread) see :meth:`standing`."""
        try:
            standing = self.lateness.apply(self.gb.db)
            for student, lms_id in self.lateness.lms_ids(self.gb.db).items():
                if student in standing.students:
                    standing.students[student].lms_user_id = lms_id
            self.gb.db.commit()
        except BaseException:
            self.gb.db.rollback()
            raise
        return standing

    def _ping(self) -> None:
        """(On the database thread) a query that needs the server's answer, and no transaction left open."""
        self.gb.db.execute(text("SELECT 1")).scalar()
        self.gb.db.rollback()

    def _commit(self, batch: list[tuple[str, str, list[dict]]]) -> list[tuple[str, str]]:
        """(On the database thread) one transaction for ``batch``; rolled back if any of it fails."""
        students = sorted({student for student, _, _ in batch})
        try:
            self._add_submissions(students)
            ids = self._grade_ids(students)
            updates = []
            for student, notebook, tests in batch:
                for test in tests:
                    grade = ids.get((student, notebook, test["id"]))
                    if grade is None:
                        from nbgrader.api import MissingEntry
                        raise MissingEntry(f"the gradebook has no grade {test['id']!r} of {notebook} for {student}")
                    updates.append({"id": grade, "score": test["score"]})
            if updates:  # a manual grade stays, flagged for review
                self.gb.db.execute(text("UPDATE grade SET auto_score = :score, "
                                        "needs_manual_grade = (manual_score IS NOT NULL) WHERE id = :id"), updates)
            if self.lateness is not None:  # (the penalties of the scores just written)
                self.lateness.apply(self.gb.db, students)
            self.gb.db.commit()
        except BaseException:
            self.gb.db.rollback()
            raise
        return [(student, notebook) for student, notebook, _ in batch]

    def _add_submissions(self, students: list[str]) -> None:
        """A submission for each student who has none yet, in the batch's transaction: the rows nbgrader's
        update_or_create_student and add_submission make (the student; the submission; per notebook, a
        submitted notebook; per grade cell a grade, per solution cell a comment, per task cell both), written
        in bulk: its ORM spent 23 ms a student (17 ms on PostgreSQL for the student row alone, a round trip each)."""
        from nbgrader.api import Assignment, Comment, Grade, Student, SubmittedAssignment, SubmittedNotebook
        known = {sid for (sid,) in self.gb.db.query(Student.id)
                 .join(SubmittedAssignment, SubmittedAssignment.student_id == Student.id)
                 .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                 .filter(Assignment.name == self.assignment, Student.id.in_(students))}
        new = [s for s in students if s not in known]
        if not new:
            return
        have = {sid for (sid,) in self.gb.db.query(Student.id).filter(Student.id.in_(new))}
        if len(have) < len(new):  # the rows nbgrader's update_or_create_student makes (no other column), in bulk
            self.gb.db.execute(Student.__table__.insert(), [{"id": s} for s in new if s not in have])
        assignment_id, notebooks = self._release
        rows = {SubmittedAssignment: [], SubmittedNotebook: [], Grade: [], Comment: []}
        for student in new:
            submission = row_id()
            rows[SubmittedAssignment].append({"id": submission, "assignment_id": assignment_id, "student_id": student})
            for notebook_id, graded, commented in notebooks:
                notebook = row_id()
                rows[SubmittedNotebook].append({"id": notebook, "assignment_id": submission, "notebook_id": notebook_id})
                rows[Grade] += [{"id": row_id(), "notebook_id": notebook, "cell_id": cell} for cell in graded]
                rows[Comment] += [{"id": row_id(), "notebook_id": notebook, "cell_id": cell} for cell in commented]
        for table, values in rows.items():  # (in this order: each refers to the one before)
            if values:
                self.gb.db.execute(table.__table__.insert(), values)

    @functools.cached_property
    def _release(self) -> tuple[str, list[tuple[str, list[str], list[str]]]]:
        """(the assignment's id, [(notebook id, its cells that get a grade, its cells that get a comment)]),
        as nbgrader's add_submission mirrors them."""
        assignment = self.gb.find_assignment(self.assignment)
        return assignment.id, [(nb.id, [c.id for c in [*nb.grade_cells, *nb.task_cells]],
                                [c.id for c in [*nb.solution_cells, *nb.task_cells]]) for nb in assignment.notebooks]

    def _grade_ids(self, students: list[str]) -> dict[tuple[str, str, str], str]:
        """{(student, notebook, grade cell): its grade row's id} for the batch's students, in one query
        (plain rows, no ORM objects) that INDEXES lets walk from the students down."""
        names = {f"s{i}": student for i, student in enumerate(students)}
        rows = self.gb.db.execute(text(
            "SELECT sa.student_id, n.name, bc.name, g.id FROM assignment a "
            "JOIN submitted_assignment sa ON sa.assignment_id = a.id JOIN notebook n ON n.assignment_id = a.id "
            "JOIN submitted_notebook sn ON sn.notebook_id = n.id AND sn.assignment_id = sa.id "
            "JOIN base_cell bc ON bc.notebook_id = n.id JOIN grade g ON g.cell_id = bc.id AND g.notebook_id = sn.id "
            "WHERE a.name = :assignment AND sa.student_id IN (" + ", ".join(f":{k}" for k in names) + ")"),
            {"assignment": self.assignment, **names})
        return {(student, notebook, cell): grade for student, notebook, cell, grade in rows}

    def close(self) -> None:
        """Close the gradebook; like any database connection, what was not flushed is not committed. A
        connection given up on is left as it is (closing it would wait for the silent server too)."""
        self.pending = []
        if self.inflight is not None:  # (a run that stopped: waited for, its outcome already known or moot)
            try:
                self.committed(wait=True)
            except Exception:  # noqa: BLE001 - reported where it was first met
                pass
        if not self.silent:
            self._answered(self.gb.close)


def row_id() -> str:
    """The id of a row a batch adds, in nbgrader's form (32 hex digits, as its new_uuid) laid out as a UUID of
    version 7 (RFC 9562): the time in milliseconds, then 74 random bits. The ids of one batch sort together, so its
    rows go side by side at the end of every index that holds an id (the rows' own, and each submission's notebooks,
    grades and comments); uuid4's random ids put each row in a page of its own, so a commit rewrote pages in
    proportion to the gradebook, not to the batch (sqlite: 89 kB written a notebook at 1,000 students, 150 kB at
    10,000; bench_coordinator)."""
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits: 12 then 62 of them are used
    value = ((time.time_ns() // 1_000_000) & (1 << 48) - 1) << 80 | 0x7 << 76 | (rand >> 68) << 64 \
        | 0b10 << 62 | rand & (1 << 62) - 1  # time (48 bits), version 7, 12 random, variant 10, 62 random
    return f"{value:032x}"


# Lookups nbgrader's schema has no index for: a submission's notebooks, a submitted notebook's grades and
# comments. Without them every such lookup scans the whole class (nbgrader export of 1,000 students took
# 12 s, 4 s with them; finding a batch's grade rows, 78 ms, 0.3 ms with them). Additive: nbgrader neither needs nor minds them; its own queries use them too.
INDEXES = {"mha_submitted_notebook_by_submission": "submitted_notebook (assignment_id)",
           "mha_grade_by_notebook": "grade (notebook_id)", "mha_comment_by_notebook": "comment (notebook_id)"}


class _Call:
    """A call handed to the database thread: its box (value or error) is filled before ``done`` is set."""

    def __init__(self, call, args: tuple, cpu: float):
        self.call, self.args, self.box, self.done = call, args, {}, threading.Event()
        self.start, self.stop_by = time.monotonic(), float("inf")
        self.looks = collections.deque([(self.start, cpu)])  # (when, the database thread's CPU time then), oldest first
        self.working = self.start  # when it was last seen working


def _answer(calls: queue.SimpleQueue) -> None:
    """The writer's database thread: make each call, put its value or exception in its box, say it is done."""
    while True:
        asked = calls.get()
        try:
            asked.box["value"] = asked.call(*asked.args)
        except BaseException as err:  # noqa: BLE001 - raised again where the call was asked for
            asked.box["error"] = err
        asked.done.set()


def with_timeouts(db_url: str) -> str:
    """``db_url`` with the database's own time limits, where the URL does not set them: PostgreSQL's
    connect, statement and lock timeouts (libpq parameters), sqlite's busy timeout."""
    url = make_url(db_url)
    limits = {"postgresql": {"connect_timeout": str(CONNECT_S),
                             "options": f"-c statement_timeout={STATEMENT_MS} -c lock_timeout={LOCK_MS}"},
              "sqlite": {"timeout": str(LOCAL_ANSWER_S - 10)}}.get(url.get_backend_name(), {})
    missing = {k: v for k, v in limits.items() if k not in url.query}
    return url.update_query_dict(missing).render_as_string(hide_password=False) if missing else db_url


def _add_indexes(gb) -> None:
    """Create INDEXES where missing (a database user not allowed to: the run goes on without them)."""
    try:
        with gb.engine.begin() as db:
            for name, on in INDEXES.items():
                db.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON {on}"))
    except ProgrammingError:  # (not an unreachable database: that is an OperationalError, raised)
        pass


def _released_under(db_url: str, assignment: str) -> str | None:
    """The course id to open the gradebook with: the one ``assignment`` was released under, else (sqlite
    leaves it dangling) a course the gradebook has; None when there is no such assignment."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as db:
            if not inspect(db).has_table("assignment"):
                return None
            row = db.execute(text("SELECT course_id FROM assignment WHERE name = :name"), {"name": assignment}).first()
            courses = [c for (c,) in db.execute(text("SELECT id FROM course ORDER BY id"))]
    finally:
        engine.dispose()
    if row is None:
        return None
    return row[0] if row[0] in courses or not courses else courses[0]
