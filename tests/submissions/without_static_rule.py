"""The grader with its static rule switched off, for tests only: the layers beneath the rule (the
sandbox, the harness, the judge's reading of records) must hold against code the rule would refuse.

    python tests/submissions/without_static_rule.py --course DIR grade ...
"""
import sys

from mha_checks import admission
from mha_grader.trusted import cli

admission.admit = lambda cells, tests, trusted=0: admission.Verdict(cells=[dict(c) for c in cells])
# (every cell runs whole, and no test is refused before it runs: judging asks admission.admit)

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
