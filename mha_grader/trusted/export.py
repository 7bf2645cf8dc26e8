"""`nbgrader export` with each student's ``lms_user_id``: the course's export plugin (nbgrader_config.py
names it: ``c.ExportApp.plugin_class``).

nbgrader's CsvExportPlugin writes grades.csv without the ``lms_user_id`` that `nbgrader db student
import` records and that an LMS matches its rows on. This plugin writes nbgrader's columns, in its order
and with its values (for each assignment and each student: the due date, the submission's time, the
raw score, the late penalty, the score after it, the maximum), then ``lms_user_id``; and it writes them
as CSV (a comma in a name is quoted; a cell never starts a formula: text.for_csv), where nbgrader's
joins the values with commas as they are.
"""
import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin

from .text import for_csv

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
