"""Measure the system calls a grading job makes: the evidence behind mha_grader/walls/kernel.py's allowlist.

    .venv/bin/python scripts/measure_syscalls.py [--quick]        (as root, with strace installed)

It grades the test corpus of submissions (tests/submissions: right answers in every style, the
mutants, the hostile and untrusted catalogues, the static rule switched off so that all their code
runs) and a set of everyday library uses, in the real sandbox with one weakening: the filter admits
every call (``Hardening(syscall_allowlist=False)``, its trace mode). strace follows the fork servers
and everything they start; every call made after a job loaded its filter (by pid 1, the student's
processes and their threads) is counted, with the arguments the filter's rules look at. It prints,
per corpus, the calls made and how often, then what differs from kernel.py: calls made that the
allowlist refuses (each must be a call no job needs, named in kernel.py's docstring) and calls the
allowlist admits that nothing made. Nothing is written to the repository; ``--quick`` grades one
right answer per notebook and the everyday uses only.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from mha_checks import admission  # noqa: E402
from mha_grader.trusted import cli, run  # noqa: E402
from mha_grader.walls import kernel, probing, sandbox  # noqa: E402
from submissions import kit  # noqa: E402
from submissions.everyday import ENDINGS, EVERYDAY, EVERYDAY_TORCH  # noqa: E402

LINE = re.compile(r"^(\d+) +(.*)$")
IN_STRACE = re.compile(r"/\* (\d+) in strace's PID NS \*/")
ARGUMENTS = {"socket": 0, "socketpair": 0, "fcntl": 1, "ioctl": 1, "kill": 0, "tgkill": 0, "prlimit64": 0,
             "clone": 1, "prctl": 0, "setresuid": 0, "setresgid": 0, "setgroups": 0, "madvise": 2, "personality": 0,
             "sched_setaffinity": 0, "sched_getaffinity": 0, "mmap": 2, "mprotect": 2}

class Trace:
    """strace -f on one fork server, its output read as it comes (a fifo): the calls made under a filter."""

    def __init__(self, pid: int, folder: str, name: str):
        self.fifo = os.path.join(folder, f"{name}.fifo")
        os.mkfifo(self.fifo)
        self.calls: collections.Counter = collections.Counter()
        self.forms: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.filtered: set[int] = set()
        self.known = {pid}
        self.waiting: dict[int, list] = collections.defaultdict(list)  # lines of a pid whose birth is not seen yet
        self.pending: dict[int, tuple[bool, str]] = {}
        self.strace = subprocess.Popen(["strace", "-f", "-qq", "-s", "48", "--decode-pids=pidns", "-o", self.fifo,
                                        "-p", str(pid)], stderr=subprocess.DEVNULL)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 20
        while _tracer(pid) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        self.strace.terminate()
        self.strace.wait()
        self.reader.join(timeout=30)

    def _read(self) -> None:
        with open(self.fifo, errors="replace") as fh:
            for raw in fh:
                match = LINE.match(raw.rstrip("\n"))
                if match:
                    self._line(int(match.group(1)), match.group(2))

    def _line(self, pid: int, rest: str) -> None:
        if rest.startswith(("+++", "---")):
            return
        if pid not in self.known:
            self.waiting[pid].append(rest)
            return
        if rest.endswith("<unfinished ...>"):
            self.pending[pid] = (pid in self.filtered, rest[:-len("<unfinished ...>")])
            return
        if rest.startswith("<..."):
            filtered, head = self.pending.pop(pid, (pid in self.filtered, rest[5:].split(" ", 1)[0] + "("))
            full = head + rest.split("resumed>", 1)[1]
        else:
            filtered, full = pid in self.filtered, rest
        self._call(pid, filtered, full)

    def _call(self, pid: int, filtered: bool, full: str) -> None:
        name, _, args = full.partition("(")
        result = full.rsplit(" = ", 1)[1] if " = " in full else ""
        if name == "seccomp" and "SECCOMP_SET_MODE_FILTER" in full and result.startswith("0"):
            self.filtered.add(pid)
            return
        if name in ("clone", "clone3", "fork", "vfork") and result[:1].isdigit():
            child = int((IN_STRACE.search(result) or re.match(r"(\d+)", result)).group(1))
            if filtered:
                self.filtered.add(child)
            self.known.add(child)
            for line in self.waiting.pop(child, []):
                self._line(child, line)
        if filtered:
            self.calls[name] += 1
            if name in ARGUMENTS:
                self.forms[name][_argument(args.rsplit(" = ", 1)[0].rstrip().removesuffix(")"), ARGUMENTS[name])] += 1


def _argument(args: str, index: int) -> str:
    """The ``index``-th argument as strace wrote it (commas inside braces and brackets kept together)."""
    depth, parts, current = 0, [], ""
    for char in args:
        if char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    value = parts[index] if index < len(parts) else "?"
    return IN_STRACE.sub("", value).strip()


def _tracer(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(line for line in fh if line.startswith("TracerPid:")).split()[1])


def everyday_jobs() -> None:
    """The everyday library uses, each a job of two tests, and the endings, a job of eight."""
    for cells, torch in ((EVERYDAY, False), (EVERYDAY_TORCH, True)):
        for name, source in cells.items():
            report = sandbox.run(_job(source, torch, [[]] * 2))
            outcomes = [r["outcome"] for r in report.records if "outcome" in r]
            ok = len(outcomes) == 2 and all("result" in o for o in outcomes)
            print(f"  everyday: {name}: {'ran' if ok else report.records}", file=sys.stderr)
    for torch in (False, True):
        report = sandbox.run(_job(ENDINGS, torch, [[n] for n in range(9)], ["n"]),
                             sandbox.Limits(test_s=2, notebook_s=30))
        print(f"  endings: {[r['status'] for r in report.records if 'status' in r]}", file=sys.stderr)


def _job(source: str, torch: bool, specs: list, names: list[str] = ()) -> dict:
    return {"torch": torch, "cells": [{"label": "c0", "source": textwrap.dedent(source)}],
            "tests": [{"id": f"t{i}", "cases": [{"function": "probe", "names": list(names), "specs": s}]}
                      for i, s in enumerate(specs)]}


def corpus(course: Path, which: str, quick: bool) -> None:
    """Hand in the corpus ``which`` ("honest" or "hostile") as students of ``course``."""
    from submissions.correct import CORRECT
    from submissions.hostile import HOSTILE
    from submissions.mutants import MUTANTS
    from submissions.untrusted import UNTRUSTED
    if which == "honest":
        kit.submit(course, "reference", {n: kit.filled(course, n) for n in kit.NOTEBOOKS})
        for i, c in enumerate([] if quick else CORRECT):
            kit.submit(course, f"c{i:02d}", {c.notebook: kit.filled(course, c.notebook, {c.cell: c.code})})
        for i, m in enumerate([] if quick else MUTANTS):
            kit.submit(course, f"m{i:03d}", {m.notebook: kit.mutant_notebook(course, m)})
    else:
        for h in HOSTILE + UNTRUSTED:
            h.submit(course)


def grade(course: Path, *args: str) -> int:
    secret = course.parent / "secret"
    if not secret.exists():
        secret.write_text("0123456789abcdef" * 4 + "\n")
        secret.chmod(0o600)
    os.environ["MHA_GRADER_SECRET"] = str(secret)
    return cli.main(["--course", str(course), "grade", "--workers", "1", "--force", *args])


def measure(label: str, work, least: int = 1) -> tuple[collections.Counter, dict]:
    """The calls made under a filter while ``work`` runs, printed (those made at least ``least`` times)."""
    sandbox.stop_servers()
    sandbox.start_servers()
    folder = tempfile.mkdtemp(prefix="mha-strace-")
    traces = [Trace(server.proc.pid, folder, f"s{n}") for n, server in enumerate(sandbox.SERVERS.values())]
    try:
        work()
    finally:
        for trace in traces:
            trace.stop()
    calls, forms = collections.Counter(), collections.defaultdict(collections.Counter)
    for trace in traces:
        calls.update(trace.calls)
        for name, seen in trace.forms.items():
            forms[name].update(seen)
    print(f"\n== {label}: {sum(calls.values())} calls under the filter, {len(calls)} distinct")
    for name, count in sorted(calls.items()):
        if count < least:
            continue
        shown = "; ".join(f"{form} x{n}" for form, n in forms[name].most_common(12)) if name in forms else ""
        print(f"  {name:<22} {count:>8}  {shown}")
    return calls, forms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run it as root (the sandbox needs root)")
    trace_mode = sandbox.Hardening(syscall_allowlist=False)
    sandbox.run.__defaults__ = (*sandbox.run.__defaults__[:-1], trace_mode)  # every job in the trace mode
    admission.refusals = lambda cells: []  # the static rule off: all of the corpus's code runs
    run.isolation_problems = lambda course: []  # (the probe's calls are tries, not needs)
    work = Path(tempfile.mkdtemp(prefix="mha-measure-"))
    measured = collections.Counter()
    measured.update(measure("everyday library uses", everyday_jobs)[0])
    measure("the probe (two jobs), beyond its sweep of every call number once each",
            lambda: print(probing.probe([str(REPO / "solutions")], list(sandbox.python_prefixes())), file=sys.stderr),
            least=3)
    for which in ("honest",) if args.quick else ("honest", "hostile"):
        course = kit.make_course(work / which / "course")
        corpus(course, which, args.quick)
        extra = () if which == "honest" else ("--test-seconds", "3", "--notebook-seconds", "15")
        calls, _ = measure(f"{which} corpus", lambda c=course, e=extra: grade(c, *e))
        if which == "honest":
            measured.update(calls)
    admitted = set(kernel.ALLOWED) | {name for action, name, _ in kernel._with_arguments(
        dict.fromkeys(kernel.FILTER_SWITCHES, True), (0, 1)) if action == kernel.pyseccomp.ALLOW}
    print("\n== the honest and everyday calls the allowlist refuses:", sorted(set(measured) - admitted) or "none")
    print("== admitted, made by no honest or everyday job:", sorted(admitted - set(measured)) or "none")


if __name__ == "__main__":
    main()
