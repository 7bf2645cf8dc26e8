"""What the hidden cases cost a sandboxed job (a measurement, not a test): the current draws
(mha_checks/hidden.py) against another version of that file, in one run, interleaved.

For each exercise notebook, solved with the reference answer, the same job is built with each draw
(same secret, same student) and run in the sandbox as the grader runs it; per draw: the calls made,
the job's CPU seconds (its cgroup's), the sandbox's wall seconds, and the trusted side's CPU seconds
(this process: laying out the inputs, reading the records, judging). Medians of --repeat runs; the
machine's other load falls alike on both draws (their runs alternate).

    git show b0a9a87:mha_checks/hidden.py > /tmp/hidden_before.py
    .venv/bin/python bench/bench_draws.py /tmp/hidden_before.py [--repeat 5]
"""
import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from submissions import kit  # noqa: E402

from mha_checks import hidden  # noqa: E402
from mha_grader.trusted import frames, judging, notebooks, secret  # noqa: E402
from mha_grader.walls import sandbox  # noqa: E402

KEY = b"0123456789abcdef" * 4


def draws_from(path: str):
    """The hidden.py at ``path``, imported beside the current one (its relative imports are mha_checks')."""
    spec = importlib.util.spec_from_file_location("mha_checks._hidden_compared", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def one_job(release, nb, draws) -> dict:
    cases = {g.id: draws.hidden_cases(g.id, secret.rng(KEY, "mha", release.name, g.id, "student", "sha"))
             for g in release.grade_cells}
    start = time.process_time()
    prog, ruling, job = judging.plan(release, nb, cases)  # as the grader builds it (only what the tests reach)
    report = sandbox.run(job)
    events = frames.events(report.records, job)
    passed = not ruling.refused and all(
        judging._judge_test(g, cases[g.id], events.get(g.id, {}), prog, report, sandbox.Limits())[0]
        for g in release.grade_cells)
    assert passed, f"{release.name}: the reference answer failed under these draws"
    return {"calls": sum(len(c) for c in cases.values()), "job CPU s": report.usage.get("cpu_s", float("nan")),
            "sandbox s": report.seconds, "trusted CPU s": time.process_time() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="another version of mha_checks/hidden.py")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    draws = {"current": hidden, "other": draws_from(args.other)}
    rows: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        course = kit.make_course(Path(tmp) / "course")
        releases = notebooks.load_release(course / "exercises" / "mha")
        for name in kit.NOTEBOOKS:  # the fork servers start before anything is timed
            one_job(releases[name], kit.filled(course, name), hidden)
        for _ in range(args.repeat):
            for name in kit.NOTEBOOKS:
                for label, module in draws.items():
                    for key, value in one_job(releases[name], kit.filled(course, name), module).items():
                        rows.setdefault((name, label), {}).setdefault(key, []).append(value)
    med = statistics.median
    print(f"Hidden cases per notebook, current draws against {args.other}: medians of {args.repeat} runs\n")
    print("| notebook | calls (other -> current) | job CPU s | sandbox s | trusted CPU s |\n|---|---|---|---|---|")
    for name in kit.NOTEBOOKS:
        o, c = rows[name, "other"], rows[name, "current"]
        cells = [f"{med(o[k]):.3f} -> {med(c[k]):.3f}" for k in ("job CPU s", "sandbox s", "trusted CPU s")]
        print(f"| {name} | {o['calls'][0]} -> {c['calls'][0]} | " + " | ".join(cells) + " |")
    total = {label: sum(med(rows[n, label]["job CPU s"]) for n in kit.NOTEBOOKS) for label in draws}
    print(f"\nThe five jobs' CPU: {total['other']:.3f} s -> {total['current']:.3f} s "
          f"({100 * (total['current'] / total['other'] - 1):+.0f}%).")


if __name__ == "__main__":
    main()
