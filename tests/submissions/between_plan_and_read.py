"""The grader, with a file replaced at a chosen moment of a run (for tests only).

    python tests/submissions/between_plan_and_read.py WHEN SOURCE TARGET --course DIR grade ...

SOURCE replaces TARGET (os.replace, once) when WHEN comes: "planned" once the run has planned its jobs
and before it reads any notebook (the gradebook is opened in between), "read" as the first notebook's
judging begins, after its file was read (as a student handing in again while the run grades it).
"""
import os
import sys

from mha_grader.trusted import cli, judging, run

when, source, target = sys.argv[1:4]


def replaced(real):
    def replace_first(*args, **kwargs):
        if os.path.lexists(source):
            os.replace(source, target)
        return real(*args, **kwargs)
    return replace_first


if when == "planned":
    run.GradebookWriter = replaced(run.GradebookWriter)
else:
    judging.grade_notebook = replaced(judging.grade_notebook)

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[4:]))
