"""Grades into nbgrader's own gradebook (formgrader and `nbgrader export` keep working)."""
import warnings

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning


class GradebookWriter:
    """One open gradebook for a run; only the process that judges outside the sandbox uses it."""

    def __init__(self, db_url: str, assignment: str):
        self.gb = Gradebook(db_url)
        self.assignment = assignment
        try:
            self.gb.find_assignment(assignment)
        except MissingEntry:
            self.gb.close()
            raise SystemExit(f"The gradebook {db_url} has no assignment {assignment!r}: run `make release` "
                             "(nbgrader generate_assignment) first.") from None

    def record(self, student: str, notebook: str, tests: list[dict]) -> None:
        """Auto scores of one notebook, committed together; a manual grade stays and is flagged."""
        try:
            self.gb.find_submission(self.assignment, student)
        except MissingEntry:
            self.gb.update_or_create_student(student)
            with warnings.catch_warnings():  # nbgrader 0.9.6 under SQLAlchemy 2.1: harmless autoflush notices
                warnings.simplefilter("ignore", SAWarning)
                self.gb.add_submission(self.assignment, student)
        for test in tests:
            grade = self.gb.find_grade(test["id"], notebook, self.assignment, student)
            grade.auto_score = test["score"]
            grade.needs_manual_grade = grade.manual_score is not None
        self.gb.db.commit()

    def close(self) -> None:
        self.gb.close()
