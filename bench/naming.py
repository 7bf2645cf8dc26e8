"""How many of the project's own mutants the feedback names, truly and falsely (a measurement, not a test).

Every mutant of tests/submissions/mutants.py is graded at the judge level (no sandbox) under several
secrets. For each failing grade cell the verdict's label is read:

* a verdict that names a cause (a label other than the observations in ``OBSERVED``: "wrong values", "departs
  ...", "raises X", "... (observed)", ...; or a message in the judge's words for a named cause, ``KNOWN``) is
  **true** when the cell's message or label holds the mutant's
  ``says`` phrase (or one of its ``also`` phrases), **false** otherwise;
* a mutant is *named* when, under every secret, some cell names it truly; *falsely named* when, under
  some secret, some cell names a cause that is not its own.

Rerunnable on any commit:  .venv/bin/python bench/naming.py [--seeds 2026 7 31337 1 2 3] [-v]
"""
import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import torch  # noqa: E402

from submissions import judged  # noqa: E402
from submissions.mutants import MUTANTS  # noqa: E402

# labels that say what was observed, not why (the judge's words for "no cause named")
OBSERVED = re.compile(r"^(wrong values|wrong shape|NaN in the result|NaN in the weights|not a linear map of x|"
                      r"departs .*|raises \w+|elements arranged as .*|heads arranged as .*|heads merged as .*|"
                      r"weights are not a softmax over the keys|negative weights|differs .*|no answer|"
                      r"returns None|not an array|not a pair|unreadable .*|causal mask incomplete|"
                      r"causal mask hides allowed keys|fails on (causal )?cross-attention.*|missing|"
                      r"function not defined|sums only some heads|bias not None|bias is None|.* \(observed\))$")


def phrases(m) -> tuple:
    return (m.says, *getattr(m, "also", ()))


# the judge's words for a named cause (search.named): a label read as an observation names one where they are said
KNOWN = ("This is a known mistake", "Two mistakes at once", "known mistakes equally")


def cell_naming(m, result) -> str:
    """'true', 'false' or 'none' for one failing cell's verdict."""
    label = (result.mistake or "").split(": ", 1)[-1]
    if not label or OBSERVED.match(label) and not any(k in result.message for k in KNOWN):
        return "none"
    return "true" if any(p in result.message or p in label for p in phrases(m)) else "false"


def measure(seeds: list[int], verbose: bool) -> dict:
    named, false, rows = [], [], []
    for m in MUTANTS:
        answer = m.answer(judged.reference_answers(m.notebook)[m.cell])
        per_seed, wrong = [], []
        for seed in seeds:
            results = judged.hidden_results(m.notebook, {m.cell: answer}, seed=seed)
            kinds = {g: cell_naming(m, r) for g, r in results.items() if not r.passed}
            per_seed.append("true" in kinds.values())
            wrong += [f"{seed}/{g}: {results[g].mistake}" for g, k in kinds.items() if k == "false"]
        if all(per_seed):
            named.append(m.student)
        if wrong:
            false.append(m.student)
        rows.append((m.student, sum(per_seed), wrong))
    if verbose:
        for student, n, wrong in rows:
            flag = "named" if n == len(seeds) else f"named under {n}/{len(seeds)}"
            print(f"{student:52s} {flag}" + (f"  FALSE: {wrong[:3]}" if wrong else ""))
    return {"named": named, "false": false, "total": len(MUTANTS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[2026, 7, 31337, 1, 2, 3])
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the students' torch code: one thread, as in the sandbox
    start = time.process_time()
    r = measure(args.seeds, args.verbose)
    n = r["total"]
    print(f"\nmutants: {n}; secrets: {len(args.seeds)}; named under every secret: {len(r['named'])} "
          f"({100 * len(r['named']) / n:.1f}%); falsely named under some secret: {len(r['false'])} "
          f"({100 * len(r['false']) / n:.1f}%)  [{time.process_time() - start:.0f} s of CPU]")
    print("not named:", sorted(set(m.student for m in MUTANTS) - set(r["named"])))
    print("falsely named:", r["false"])


if __name__ == "__main__":
    main()
