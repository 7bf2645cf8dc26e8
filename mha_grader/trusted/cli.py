"""`python -m mha_grader`: create the course secret, check the sandbox, grade the class.

    python -m mha_grader secret [--force]
    python -m mha_grader probe
    python -m mha_grader grade [--student ID ...] [--notebook NAME ...] [--force] [--export]
                               [--workers W] [--scheduler tcp://HOST:8786] [--db-url URL]
                               [--new-secret] [--timing] [--unsafe-no-sandbox]
"""
import argparse
import os
import sys
from pathlib import Path

from . import resume, stopping


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _without_iri_grammars()
    args.argv = argv  # None: this process's own (resume.command rebuilds the command typed)
    if args.command == "grade":
        if args.workers is None:
            args.workers = default_workers(dask=bool(args.scheduler))
        return _grade(args, resume.command(argv))
    from . import run, secret
    if args.command == "secret":
        try:
            print(f"Created the course secret {secret.create(args.force)} (keep it; never commit it).")
        except (FileExistsError, secret.NoSecret) as err:
            print(f"{err}.", file=sys.stderr)
            return 1
        return 0
    problems = run.isolation_problems(Path(args.course))  # probe
    print("\n".join(problems) or "The sandbox isolates student code on this machine.")
    return 1 if problems else 0


def _without_iri_grammars() -> None:
    """Loading nbgrader imports jsonschema (nbgrader -> nbformat -> jsonschema), which imports rfc3987_syntax where it
    is installed (Jupyter's server installs it), and that compiles 38 Lark grammars as it is imported: 1.2 s of CPU,
    half of loading the grader, for the "iri" formats of a jsonschema FormatChecker. Nothing in this process checks
    a format (nbformat validates without a FormatChecker; the grader reads notebooks as data within its own bounds,
    notebooks.parse), so this process does without it: jsonschema then leaves those two formats unchecked, as it
    does where rfc3987_syntax is not installed."""
    sys.modules.setdefault("rfc3987_syntax", None)  # (None: its import raises ImportError, which jsonschema expects)


def _grade(args, resume: str) -> int:
    """Grade, with ctrl-C and SIGTERM honoured from the start (the grader's imports take seconds)."""
    stop = stopping.Stop()
    with stop.installed():
        try:
            with stop.waiting():
                print("mha_grader: loading the grader ...", file=sys.stderr, flush=True)
                from . import run
        except stopping.Stopped:
            print(f"Stopped by {stop.name()} while loading the grader; nothing was graded. Run again with: {resume}",
                  file=sys.stderr)
            return stop.status()
        return run.grade(args, stop, resume)


def default_workers(dask: bool = False) -> int:
    """Sandboxes at a time when --workers is not given: one per core and one more, so that the cores have
    work while this process judges a result and renders its feedback (the grades do not depend on it).
    On Dask, one per core: a LocalCluster's worker processes judge their own results; with a scheduler of
    one's own it sets only how many students are submitted ahead."""
    cores = os.cpu_count() or 1
    return cores if dask else cores + 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mha_grader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--course", default=".", help="the course folder (default: here)")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("secret", help="create the course secret the hidden inputs are drawn from")
    make.add_argument("--force", action="store_true", help="replace an existing secret (hidden inputs change)")
    sub.add_parser("probe", help="check that the sandbox isolates student code on this machine")
    grade = sub.add_parser("grade", help="grade every submission that is new or changed")
    grade.add_argument("--assignment", default="mha")
    grade.add_argument("--student", action="append", default=[], help="only this student (repeatable)")
    grade.add_argument("--notebook", action="append", default=[], help="only this notebook, e.g. 02_split_heads")
    grade.add_argument("--force", action="store_true", help="grade again even what is already graded")
    grade.add_argument("--workers", type=int, default=None,
                       help="sandboxes at a time (default: one more than the cores; with --scheduler local, as "
                            "many Dask workers as cores)")
    grade.add_argument("--scheduler", default="", help="a Dask scheduler address; 'local' starts one here")
    grade.add_argument("--db-url", default=os.environ.get("MHA_GRADER_DB_URL", ""),
                       help="gradebook URL (default sqlite:///gradebook.db; e.g. postgresql://user@host/db)")
    grade.add_argument("--test-seconds", type=float, default=10.0, help="wall time of one test (default 10)")
    grade.add_argument("--notebook-seconds", type=float, default=60.0,
                       help="wall time of all the tests of one notebook (default 60)")
    grade.add_argument("--export", action="store_true",
                       help="then write grades.csv with nbgrader export (what `make grade` does)")
    grade.add_argument("--new-secret", action="store_true",
                       help="the course secret was replaced on purpose: grade again what another secret graded")
    grade.add_argument("--timing", action="store_true",
                       help="also print what grading cost this process per notebook (for the benchmarks)")
    grade.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="UNSAFE: run student code with the grader's own rights (only for your own tests)")
    return parser
