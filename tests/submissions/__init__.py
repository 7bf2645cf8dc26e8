"""Sample submissions for the nbgrader exercises, as recipes over the course's own notebooks.

kit.py builds a submission from the student version of a notebook (exercises/mha/) by filling
its solution cells, and grades a batch of them with the real nbgrader commands in a temporary
copy of the course. mutants.py and hostile.py are the two catalogues.
"""
