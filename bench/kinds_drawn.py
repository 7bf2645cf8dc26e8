"""Per grade cell, how many of N secrets draw each kind of input its prompt allows (a measurement, not a
test; tests/test_hidden.py asserts every kind under every secret). With ``--other``, another version of
mha_checks/hidden.py is counted beside the current one, by the same reading of the arguments
(tests/test_hidden.py's ``kinds``), over the current list of kinds.

    git show 249e11a:mha_checks/hidden.py > /tmp/hidden_before.py
    .venv/bin/python bench/kinds_drawn.py [--secrets 1000] [--other /tmp/hidden_before.py]
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from bench_draws import draws_from  # noqa: E402
from test_hidden import kinds  # noqa: E402

from mha_checks import hidden  # noqa: E402
from mha_grader.trusted import secret  # noqa: E402


def counts(draws, n: int) -> dict:
    """{grade cell: {kind: secrets that drew it}} over the kinds of the current hidden.KINDS."""
    found = {g: dict.fromkeys(hidden.KINDS[g], 0) for g in hidden.GRADE_CELLS}
    for i in range(n):
        key = f"secret number {i:04d} of the coverage test".encode()
        for g, notebook in hidden.GRADE_CELLS.items():
            cases = draws.hidden_cases(g, secret.rng(key, "mha", notebook, g, "s", "d"))
            drawn = set().union(*(kinds(c) for c in cases))
            for k in drawn & set(found[g]):
                found[g][k] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=1000)
    parser.add_argument("--other", help="another version of mha_checks/hidden.py")
    args = parser.parse_args()
    now = counts(hidden, args.secrets)
    other = counts(draws_from(args.other), args.secrets) if args.other else None
    print(f"Kinds drawn per grade cell, secrets that drew each of {args.secrets}"
          + (f" ({args.other} -> current)" if other else "") + "\n")
    print("| grade cell | kind | secrets |\n|---|---|---|")
    for g in hidden.GRADE_CELLS:
        for k, n in now[g].items():
            print(f"| {g} | {k} | " + (f"{other[g][k]} -> " if other else "") + f"{n} |")


if __name__ == "__main__":
    main()
