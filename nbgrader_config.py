"""nbgrader 0.9.6 configuration of the course. Run every nbgrader command from the repository root.

Folders (nbgrader's names -> ours):
  source    -> solutions/{assignment}/   notebooks with solutions (instructors only)
  release   -> exercises/{assignment}/   student versions, produced only by `make release`
  submitted/{student}/{assignment}/, autograded/, feedback/, gradebook.db, *.csv: never in git.

nbgrader makes the release (`make release`), keeps the gradebook, serves formgrader and
`nbgrader validate`, and exports grades. Grading itself is the course's own sandboxed grader
(`make grade` = python -m mha_grader grade): nbgrader's autograde would run student code with
the instructor's rights and judge it inside the student's own kernel (see the README).
"""
c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"

# One header for every exercise (restart and run all, validate), kept in one place.
c.IncludeHeaderFooter.header = "solutions/header.ipynb"

# `nbgrader export` writes grades.csv with nbgrader's columns and each student's lms_user_id last (for an LMS
# import; `nbgrader db student import` records it): the course's export plugin, mha_grader/trusted/export.py.
c.ExportApp.plugin_class = "mha_grader.trusted.export.CsvExportWithLmsId"

# Late work (README, "Running the course on JupyterHub"): `make grade` applies nbgrader's late-submission plugin
# as autograde does. nbgrader's default is no penalty; uncomment for a score of 0 for late work, or name your own.
# c.LateSubmissionPlugin.penalty_method = "zero"
# c.AssignLatePenalties.plugin_class = "late.SubMarks"   # a class in late.py beside this file

# `nbgrader validate` (what students run): a stuck cell is stopped after 10 s, not nbgrader's 30 s.
c.Execute.timeout = 10
