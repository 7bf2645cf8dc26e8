"""The grader with its static rule switched off, for tests only: the layers beneath the rule (the
sandbox, the harness, the judge's reading of records) must hold against code the rule would refuse.

    python tests/submissions/without_static_rule.py --course DIR grade ...
"""
import sys

from mha_grader import cli, judging

judging._blocked_for = lambda *args, **kwargs: None  # no cell is refused before it runs

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
