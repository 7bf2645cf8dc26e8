"""grades.csv: the course's plugin for `nbgrader export` (each student's ``lms_user_id`` too), and
`nbgrader export` run after a grading run (:func:`write`: ``grade --export``, which `make grade` gives).

The plugin: nbgrader_config.py names it (``c.ExportApp.plugin_class``).

nbgrader's CsvExportPlugin writes grades.csv without the ``lms_user_id`` that `nbgrader db student
import` records and that an LMS matches its rows on. This plugin writes nbgrader's columns, in its order
and with its values (for each assignment and each student: the due date, the submission's time, the
raw score, the late penalty, the score after it, the maximum), then ``lms_user_id``; and it writes them
as CSV (a comma in a name is quoted; a cell never starts a formula: text.for_csv), where nbgrader's
joins the values with commas as they are.

After a run, :func:`write` runs `nbgrader export` as the instructor would, in the course folder with this
interpreter, so that the course's nbgrader_config.py chooses the gradebook and the exporter; it writes
into grades.csv.partial, which replaces grades.csv only once whole (an export that fails leaves the last
grades.csv as it was). It is a process of its own (its own session: ctrl-C in the terminal is for the run,
which ends it). What it prints is kept, not shown: when it fails, :func:`write` gives one clause saying why
(the gradebook is locked by another program, nbgrader's error, or its exit status), never its traceback.
"""
import csv
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin

from .text import for_csv, for_terminal

NAME = "grades.csv"
ERROR = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit)): (?:\([\w.]+\) )?(.+)$")  # a traceback's last line

COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
           "raw_score", "late_submission_penalty", "score", "max_score", "lms_user_id"]


class CsvExportWithLmsId(CsvExportPlugin):
    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(COLUMNS)
            for row in self.rows(gradebook):
                writer.writerow([for_csv(_cell(value)) for value in row])

    def rows(self, gradebook: Gradebook):
        """One row per assignment and student (``--assignment``, ``--student`` choose), as CsvExportPlugin has it."""
        for assignment in gradebook.assignments:
            if self.assignment and assignment.name not in map(str, self.assignment):
                continue
            for student in gradebook.students:
                if self.student and student.id not in map(str, self.student):
                    continue
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:  # nothing handed in: 0
                    timestamp, raw, penalty, score = "", 0.0, 0.0, 0.0
                else:
                    timestamp, raw, penalty = submission.timestamp, submission.score, submission.late_submission_penalty
                    score = max(0.0, raw - penalty)
                yield [assignment.name, assignment.duedate, timestamp, student.id, student.last_name,
                       student.first_name, student.email, raw, penalty, score, assignment.max_score,
                       student.lms_user_id]


def _cell(value):
    """A value as nbgrader's export writes it (str(), None as ""), a number kept a number."""
    return "" if value is None else value if isinstance(value, int | float) else str(value)


# --- after a run: `nbgrader export`, as the instructor would run it ------------------------------------

def write(course: Path, stop) -> str:
    """Write grades.csv with `nbgrader export`; "" once written, else why not (a clause). ``stop`` (stopping.Stop)
    is honoured while it runs: the export is ended, and Stopped raised."""
    partial = Path(course) / f"{NAME}.partial"
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])  # (nbgrader runs `alembic`)
    proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "export", f"--to={partial}"], cwd=course,
                            env={**os.environ, "PATH": path}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with stop.waiting():
            said, _ = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        partial.unlink(missing_ok=True)
        raise
    if proc.returncode == 0 and partial.is_file():
        os.replace(partial, Path(course) / NAME)
        return ""
    partial.unlink(missing_ok=True)
    return why(said.decode("utf-8", "replace"), proc.returncode)


def why(said: str, status: int) -> str:
    """Why `nbgrader export` failed, from what it printed (its last error line) and its exit status."""
    errors = [found for line in said.splitlines() if (found := ERROR.match(line.strip()))]
    if not errors:
        return f"nbgrader export ended with exit status {status} and no error message"
    kind, message = errors[-1].groups()
    if "database is locked" in message:
        return ("the gradebook is locked: another program (formgrader, or another nbgrader command) is writing to "
                "it; wait until it is done")
    return f"nbgrader export failed ({for_terminal(kind, 60)}: {for_terminal(message.rstrip('.'), 300)})"
