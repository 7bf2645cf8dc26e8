"""nbgrader 0.9.6 configuration of the course. Run every nbgrader command from the repository root.

Folders (nbgrader's names -> ours):
  source    -> solutions/{assignment}/   notebooks with solutions and hidden tests (instructors only)
  release   -> exercises/{assignment}/   student versions, produced only by `make release`
  submitted/{student}/{assignment}/, autograded/, feedback/, gradebook.db, grades.csv: never in git.

Instructor commands: `make release` (generate_assignment), `make grade` (autograde, feedback, grades.csv).
What each setting below changes, measured on hostile submissions: tests/test_exercises_hostile.py.
"""
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.preprocessors import (CheckCellMetadata, ClearHiddenTests, ClearOutput, DeduplicateIds, GetGrades,
                                    NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec)

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"

# One header for every exercise (restart and run all, validate), kept in one place.
c.IncludeHeaderFooter.header = "solutions/header.ipynb"

# --- Autograding ---------------------------------------------------------------------------
# A cell gets 30 s by default; ours take well under a second, so a stuck cell is stopped sooner.
c.Execute.timeout = 10
# Minimal tracebacks: a failed hidden test shows its one-line message, never the test's code.
# (nbclient adds --HistoryManager.hist_file=:memory: for IPython kernels by itself.)
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]
# A test cell the student deleted, or whose nbgrader metadata they stripped, is put back and
# run, instead of scoring 0 and waiting for a manual grade that never comes.
c.OverwriteCells.add_missing_cells = True


class DropUnreadableMetadata(NbGraderPreprocessor):
    """Remove a cell's nbgrader metadata when nbgrader cannot read it, and say so in the log.

    Stock nbgrader raises SchemaTooOldError/SchemaTooNewError for ONE cell whose schema_version
    was edited or deleted, and that error stops the whole autograde batch: every student after
    this one goes ungraded. Without the metadata the cell is an ordinary cell; if it was a test
    cell, OverwriteCells puts the original back (add_missing_cells above).
    """

    def preprocess(self, nb, resources):
        self._validator = MetadataValidator()
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if "nbgrader" in cell.metadata:
            try:
                self._validator.validate_cell(cell)
            except Exception as err:  # schema mismatch, or a value of the wrong type
                self.log.warning("Cell %d has unreadable nbgrader metadata (%s: %s); it is removed, and a "
                                 "missing test cell is restored from the gradebook.", index, type(err).__name__,
                                 str(err).splitlines()[0])
                del cell.metadata["nbgrader"]
        return cell, resources


c.Autograde.sanitize_preprocessors = [ClearOutput, DeduplicateIds, OverwriteKernelspec, DropUnreadableMetadata,
                                      OverwriteCells, CheckCellMetadata]

# --- Feedback ------------------------------------------------------------------------------
# The feedback HTML shows the autograded notebook, whose test cells were restored WITH their
# hidden tests: strip those regions again before rendering.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
