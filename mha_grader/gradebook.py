"""Grades into nbgrader's own gradebook (formgrader and `nbgrader export` keep working)."""
import warnings

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import SAWarning


class GradebookWriter:
    """One open gradebook for a run; only the process that judges outside the sandbox uses it."""

    def __init__(self, db_url: str, assignment: str):
        course_id = _released_under(db_url, assignment)
        if course_id is None:
            raise SystemExit(f"The gradebook {db_url} has no assignment {assignment!r}: run `make release` "
                             "(nbgrader generate_assignment) first.")
        self.gb = Gradebook(db_url, course_id)  # nbgrader's default id would add a stray course row
        self.assignment = assignment

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
