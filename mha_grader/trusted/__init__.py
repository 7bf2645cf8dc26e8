"""The trusted side: the coordinating process (and each Dask worker's grading thread), never the sandbox.

Theory of operation. Everything that decides a grade runs here, where no student code runs: a check
inside the student's process could be patched by that process. This side holds the course secret,
the hidden inputs and the gradebook, and trusts nothing a submission or a job gives it: a notebook is
read as bounded data, a job's records are checked against their schema, and every string a student
can influence is capped and escaped for the place it goes. One bad notebook never stops the class.

The path of one notebook, and the module that takes each step:

  plan      jobs.plan      which notebooks to grade: new or changed since their stamp (course.py),
                           from the files' status alone, nothing opened; each student's timestamp.txt
                           read as data (collected.py)
  make      jobs.Maker     the notebook's bytes read once (notebooks.read_file), the hidden inputs
                           drawn from them and the secret (secret.py, mha_checks.hidden)
  rule      judging.plan   the notebook (parsed within bounds: notebooks.parse) matched to the
                           release, and the ready-made rule decided from its source (mha_checks.admission):
                           what each test's functions reach runs, and only that; a test that
                           reaches refused code is not run
  run       judging        the job handed to the walls (walls/sandbox.run), which run it inside
  check     frames.events  every record it sent back validated, bounded and made valid text
  judge     judging        each test's outcomes compared with the reference (mha_checks.judge), a
                           mistake named only when it reproduces every call; one sentence when
                           there is no outcome (a timeout, a crash, the memory cap)
  render    feedback.py    the student's page and the autograded notebook, where the job ran
  record    recording.py   files written and grades committed in batches (gradebook.py), with the
                           batch's late penalties (lateness.py), then the stamp (course.py): a
                           notebook counts as graded only then
  after     lateness.py    the late policy applied to the whole class; collected.py puts nbgrader's
                           collect files beside each student's pages (release_feedback needs them)
  report    report.py      the terminal's progress and summary, the class's CSV files and
                           class_report.py's page; text.py escapes for each sink

run.py holds one run together: the course's lock (lock.py), ctrl-C and SIGTERM (stopping.py), the
command that resumes (resume.py) and the exit statuses; cli.py is `python -m mha_grader`; export.py is
the course's `nbgrader export` plugin (nbgrader's columns, then lms_user_id). Jobs run
on execute.py's threads in this process or on Dask workers (cluster.py), which run execute.grade_job
(run, check, judge, render) and need no course folder, secret or gradebook; execute.py also names
the grader's version (every source file of mha_grader and mha_checks, and the packages they rest
on) so that a run uses one version only.
"""
