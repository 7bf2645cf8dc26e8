"""Lateness as nbgrader autograde records it, in nbgrader's own gradebook: when each submission was
handed in, how late it is, and the course's late-submission penalty per notebook (so that `nbgrader
export`, formgrader and the class report show them).

What is nbgrader's is used, not rewritten:
* the time: timestamp.txt, parsed by nbgrader.utils.parse_utc (collected.py reads the file);
* how late: SubmittedAssignment.duedate and .total_seconds_late (the assignment's due date plus the
  student's extension), applied to plain values;
* the penalty: the plugin class that the course's nbgrader configuration names for AssignLatePenalties
  (LateSubmissionPlugin, ``penalty_method`` 'none' or 'zero', or the course's own class, imported from the
  course folder as nbgrader's commands import it), read from the same files nbgrader's commands read
  there, called as AssignLatePenalties calls it (the student, the notebook's score, the seconds late) and
  bounded by its own _check_late_penalty (0 to the notebook's score).

As in autograde: a submission without a timestamp keeps the time the gradebook has; an on-time notebook's
penalty is None. Autograde applies the penalty only to what it grades; here every run applies it to the
whole class (in bulk: a class on time costs one query), so a due date, an extension, a policy or a
manual grade changed since is reflected by the next `make grade`. The grades of a batch and their
penalties are committed in one transaction (GradebookWriter calls :meth:`Lateness.apply` there).
"""
import datetime
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from nbgrader.api import Assignment, Notebook, Student, SubmittedAssignment, SubmittedNotebook
from sqlalchemy import bindparam, select

QUIET = logging.getLogger("mha_grader.trusted.lateness")  # nbgrader's plugins log every call: kept off the terminal
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class BadConfig(RuntimeError):
    """The course's nbgrader configuration or its late-submission plugin cannot be loaded (one sentence)."""


def load_penalties(course_root: Path):
    """nbgrader's AssignLatePenalties as the course configures it, with its plugin made (``.plugin_inst``)."""
    from jupyter_core.application import JupyterApp
    from nbgrader.apps.baseapp import NbGrader
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config.application import Application
    app = NbGrader(log=QUIET)
    sys.path.insert(0, str(course_root))  # (nbgrader's commands import the course's plugins from the course folder)
    try:
        JupyterApp.load_config_file(app, suppress_errors=False)  # the Jupyter config folders, as every nbgrader command
        Application.load_config_file(app, "nbgrader_config.py", path=str(course_root))  # ... then the course's own
        penalties = AssignLatePenalties(config=app.config, log=QUIET)
        penalties.init_plugin()
    except Exception as err:  # noqa: BLE001 - the instructor's files: any failure is said in one sentence
        raise BadConfig(f"the course's nbgrader configuration or its late-submission plugin could not be loaded "
                        f"({type(err).__name__}: {str(err)[:300]})") from err
    finally:
        sys.path.remove(str(course_root))
    return penalties


def seconds_late(timestamp, duedate, extension) -> float:
    """nbgrader's own rule (SubmittedAssignment.duedate, .total_seconds_late) on plain values."""
    row = SimpleNamespace(timestamp=timestamp, extension=extension, assignment=SimpleNamespace(duedate=duedate))
    row.duedate = SubmittedAssignment.duedate.fget(row)
    return SubmittedAssignment.total_seconds_late.fget(row)


@dataclass
class Standing:
    """One student's submission as the gradebook has it after a run (for the class's tables)."""
    timestamp: datetime.datetime | None
    seconds_late: float
    penalty: float
    lms_user_id: str | None = None


@dataclass
class ClassStanding:
    duedate: datetime.datetime | None
    students: dict[str, Standing] = field(default_factory=dict)


class Lateness:
    """The course's penalty and the submission times read this run ({student: datetime or None})."""

    def __init__(self, penalties, timestamps: dict, assignment: str):
        self.penalties, self.timestamps, self.assignment = penalties, timestamps, assignment
        self.problems: list[tuple[str, str, str]] = []  # (student, notebook, what the plugin did wrong): no penalty

    def apply(self, db, students: list[str] | None = None) -> ClassStanding:
        """Record the times read and each notebook's penalty for ``students`` (None: every submission of the
        assignment), in ``db``'s transaction (the caller commits). For a batch of students (GradebookWriter) only
        late submissions are penalised anew: new grades change their penalties, and a time read can only make a
        submission later; a penalty left on a submission now on time (a due date, an extension or the policy
        changed) is cleared by the pass over the whole class, at the end of every run."""
        query = (select(SubmittedAssignment.id, SubmittedAssignment.student_id, SubmittedAssignment.timestamp,
                        SubmittedAssignment.extension, Assignment.duedate)
                 .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                 .where(Assignment.name == self.assignment))
        if students is not None:
            query = query.where(SubmittedAssignment.student_id.in_(students))
        standing, late, moved = ClassStanding(None), {}, []
        for sub, student, stored, extension, duedate in db.execute(query):
            standing.duedate = duedate
            read = self.timestamps.get(student)
            if read is not None and read != stored:  # (none read: the gradebook's time stays, as autograde leaves it)
                moved.append({"sub": sub, "at": read})
                stored = read
            late_by = seconds_late(stored, duedate, extension)
            standing.students[student] = Standing(stored, late_by, 0.0)
            if late_by > 0:
                late[sub] = (student, late_by)
        if moved:
            table = SubmittedAssignment.__table__
            db.execute(table.update().where(table.c.id == bindparam("sub")).values(timestamp=bindparam("at")), moved)
        self._penalise(db, late, standing, students)
        return standing

    def _penalise(self, db, late: dict, standing: ClassStanding, students: list[str] | None) -> None:
        """Each notebook's penalty: the plugin's for a late submission, None for one on time (only rows that change
        are written; on time, only the notebooks that carry a penalty are read, and only for the whole class)."""
        rows = (select(SubmittedNotebook.id, SubmittedNotebook.assignment_id, SubmittedNotebook.late_submission_penalty,
                       SubmittedNotebook.score, Notebook.name, SubmittedAssignment.student_id)
                .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
                .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
                .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                .where(Assignment.name == self.assignment))
        if students is not None:
            rows = rows.where(SubmittedAssignment.student_id.in_(students))
        changes = []
        if students is None:  # (see apply)
            on_time = rows.where(SubmittedNotebook.late_submission_penalty.is_not(None))
            changes += [{"nb": nb, "penalty": None} for nb, sub, *_ in db.execute(on_time) if sub not in late]
        if late:
            for nb, sub, stored, score, name, student in db.execute(
                    rows.where(SubmittedNotebook.assignment_id.in_(list(late)))):
                penalty = self._penalty(student, name, score, late[sub][1])
                standing.students[student].penalty += penalty or 0.0
                if penalty != stored:
                    changes.append({"nb": nb, "penalty": penalty})
        if changes:
            table = SubmittedNotebook.__table__
            db.execute(table.update().where(table.c.id == bindparam("nb"))
                       .values(late_submission_penalty=bindparam("penalty")), changes)

    def _penalty(self, student: str, notebook: str, score: float, late_by: float) -> float | None:
        """The plugin's penalty for one late notebook, bounded as AssignLatePenalties bounds it; None (and a
        problem noted) when the plugin fails or answers anything but a finite number or None."""
        try:
            penalty = self.penalties.plugin_inst.late_submission_penalty(student, score, late_by)
        except Exception as err:  # noqa: BLE001 - the course's own code: its failure is named, the run goes on
            self.problems.append((student, notebook, f"the late-submission plugin raised {type(err).__name__}: "
                                                     f"{str(err)[:200]}; no penalty recorded"))
            return None
        if penalty is None:
            return None
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not math.isfinite(penalty):
            self.problems.append((student, notebook, f"the late-submission plugin answered {str(penalty)[:60]!r}, "
                                                     "not a number; no penalty recorded"))
            return None
        return float(self.penalties._check_late_penalty(SimpleNamespace(score=score), penalty))

    def lms_ids(self, db) -> dict[str, str]:
        """{student: lms_user_id} of the students that have one (nbgrader db student import)."""
        return {student: lms for student, lms in db.execute(select(Student.id, Student.lms_user_id)
                                                             .where(Student.lms_user_id.is_not(None)))}
