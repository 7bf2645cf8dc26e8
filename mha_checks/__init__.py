"""mha_checks: the checks behind the course's exercises (not maths: that is mha_lib).

* :mod:`mha_checks.calling` calls a student's function on a case and returns plain data (it is
  the only module that runs next to student code, also inside the grader's sandbox);
* :mod:`mha_checks.cases` describes a case (function, arguments, kind of check);
* :mod:`mha_checks.judge` turns a case and its outcome into a Verdict (trusted side, never raises),
  with the per-exercise checks and diagnosis of :mod:`mha_checks.diagnosis` (one module per exercise), the mistake switches of
  :mod:`mha_checks.variants` and :mod:`mha_checks.attention`, the permutation analysis of
  :mod:`mha_checks.arrange` and the tolerance policy of :mod:`mha_checks.arrays`;
* :mod:`mha_checks.hidden` draws the hidden cases of every grade cell from the grader's generator;
* :mod:`mha_checks.visible` is what the notebooks' grade cells call (same path, in the kernel);
* :mod:`mha_checks.policy` refuses ready-made answers from the source, statically.
"""
