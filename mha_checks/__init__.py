"""mha_checks: the checks behind the course's exercises (not maths: that is mha_lib).

* :mod:`mha_checks.calling` calls a student's function on a case and returns plain data (it is
  the only module that runs next to student code, also inside the grader's sandbox);
* :mod:`mha_checks.cases` describes a case (function, arguments, kind of check).
"""
