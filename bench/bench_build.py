"""Build benchmark for the course site (a measurement, not a test).

Times `jupyter-book build -W -n --keep-going .` in five situations and says which notebooks
each build executed (from myst-nb's log: "Executing notebook" vs "Using cached notebook";
site/parallel_execution.py logs the notebooks it runs ahead of myst-nb in the same words):

1. cold: no _build (so no jupyter-cache either): every chapter is executed;
2. no change: nothing to read, nothing executed;
3. touch: one chapter's mtime changes (content identical): Sphinx re-reads it, jupyter-cache
   finds its code unchanged, nothing is executed;
4. prose edit: a sentence appended to that chapter's text: re-read, not executed;
5. code edit: a comment appended to that chapter's first code cell: that chapter, and only
   it, is executed again.

It works on a scratch copy of the book (git-tracked and untracked-but-not-ignored files, plus
the maths fonts and build-time MathJax in .cache), so it never deletes the checkout's _build nor edits a
chapter there. `--keep` leaves the copy for inspection.

    make bench-build            # or: .venv/bin/python bench/bench_build.py [--chapter NAME]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JB = ROOT / ".venv" / "bin" / "jupyter-book"
EXTRA = Path(".cache") / "site-math"      # the TeX fonts the site serves (make site-node)
NODE = Path(".cache") / "node"            # mathjax-full, which typesets the maths at build time
LOG_LINE = re.compile(r"(?P<path>\S+\.(?:md|ipynb)): (?P<what>Executing notebook|"
                      r"Using cached notebook|Executed notebook in (?P<secs>[\d.]+) seconds)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def copy_book(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for needed in (EXTRA, NODE):
        if not (ROOT / needed).is_dir():
            sys.exit(f"{needed} is missing: run `make site-node` first (make bench-build does)")
    shutil.copytree(ROOT / EXTRA, dest / EXTRA)
    (dest / NODE).symlink_to(ROOT / NODE)


def build(book: Path) -> tuple[float, dict[str, str], dict[str, float], int, str]:
    """One strict build; returns (seconds, {notebook: executed|cached}, {notebook: exec s},
    exit code, log)."""
    start = time.perf_counter()
    proc = subprocess.run([str(JB), "build", "-W", "-n", "--keep-going", "."], cwd=book,
                          capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    seconds = time.perf_counter() - start
    log = ANSI.sub("", proc.stdout + proc.stderr)
    status, exec_secs = {}, {}
    for m in LOG_LINE.finditer(log):
        name = Path(m["path"]).relative_to(book).as_posix() if m["path"].startswith("/") else m["path"]
        if m["what"] == "Executing notebook":
            status[name] = "executed"
        elif m["what"] == "Using cached notebook":
            status.setdefault(name, "cached")
        else:
            exec_secs[name] = float(m["secs"])
    return seconds, status, exec_secs, proc.returncode, log


def chapters(book: Path) -> list[str]:
    toc = (book / "_toc.yml").read_text()
    return [f"{m}.md" for m in re.findall(r"(?:root|file):\s*(\S+)", toc)
            if (book / f"{m}.md").is_file()]


def edit_prose(path: Path) -> None:
    path.write_text(path.read_text() + "\n\nA sentence added by bench_build.py.\n")


def edit_code(path: Path) -> None:
    text = path.read_text()
    fence = re.search(r"^```\{code-cell\}[^\n]*\n(?::[^\n]*\n)*(?:\n)?", text, re.M)
    if not fence:
        sys.exit(f"{path} has no code cell to edit")
    path.write_text(text[:fence.end()] + "# edited by bench_build.py\n" + text[fence.end():])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", help="the chapter touched/edited (default: the first "
                        "chapter after the intro in _toc.yml), e.g. chapters/02_committee.md")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    args = parser.parse_args()
    if not JB.exists():
        sys.exit("no .venv: run `make venv` first")

    scratch = Path(tempfile.mkdtemp(prefix="bench-build-"))
    book = scratch / "book"
    book.mkdir()
    try:
        copy_book(book)
        names = chapters(book)
        target = args.chapter or (names[1] if len(names) > 1 else names[0])
        if target not in names:
            sys.exit(f"{target} is not a chapter in _toc.yml: {names}")
        path = book / target
        steps = [
            ("cold (no _build)", lambda: shutil.rmtree(book / "_build", ignore_errors=True)),
            ("no change", lambda: None),
            (f"touch {target}", lambda: os.utime(path)),
            (f"prose edit {target}", lambda: edit_prose(path)),
            (f"code edit {target}", lambda: edit_code(path)),
        ]
        rows, per_notebook = [], {}
        for label, prepare in steps:
            prepare()
            seconds, status, exec_secs, rc, log = build(book)
            executed = sorted(n for n, s in status.items() if s == "executed")
            cached = sorted(n for n, s in status.items() if s == "cached")
            rows.append((label, seconds, rc, executed, cached, sum(exec_secs.values())))
            if not per_notebook:
                per_notebook = exec_secs
            if rc != 0:
                print(f"--- build failed ({label}); last lines of its log:\n"
                      + "\n".join(log.splitlines()[-25:]), file=sys.stderr)

        print(f"\nBuild benchmark: {len(names)} notebooks in _toc.yml, "
              f"jupyter-book build -W -n --keep-going (execute_notebooks: cache)\n")
        print(f"{'scenario':<42} {'wall s':>7} {'exec s':>7} {'rc':>3}  executed / from cache")
        print("-" * 100)
        for label, seconds, rc, executed, cached, exec_total in rows:
            ran = ", ".join(Path(n).stem for n in executed) or "-"
            print(f"{label:<42} {seconds:7.1f} {exec_total:7.1f} {rc:>3}  "
                  f"{len(executed)} run ({ran}) / {len(cached)} cached")
        print("\n'cached' in the cold build: a notebook whose code cells are identical to one "
              "already executed\n(jupyter-cache keys on the code, e.g. untouched placeholders).")
        print("\nexecution time per notebook, cold build:")
        for name, secs in sorted(per_notebook.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<40} {secs:6.1f} s")
        return max(r[2] for r in rows)
    finally:
        if args.keep:
            print(f"\nscratch copy kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
