"""Stock nbgrader, as the course graded before its own grader (commit 00cc176), for comparisons.

`make_stock_course(dest)` builds a course folder whose notebooks carry their hidden tests inside
(nbgrader's own way), with that commit's nbgrader_config.py and mha_lib (its checks lived in
mha_lib.grading then), released with `nbgrader generate_assignment`; `stock_autograde(course)`
runs plain `nbgrader autograde` on it, serially, as nbgrader does. Benchmarks only.
"""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STOCK_COMMIT = "00cc176"
BIN = Path(sys.executable).parent


def _git_files(commit: str, folder: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", commit, folder],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def make_stock_course(dest: Path) -> Path:
    for folder in ("solutions", "mha_lib", "nbgrader_config.py"):
        for name in _git_files(STOCK_COMMIT, folder):
            target = dest / ("stocklib" if name.startswith("mha_lib/") else "") / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(subprocess.run(["git", "-C", str(ROOT), "show", f"{STOCK_COMMIT}:{name}"],
                                              check=True, capture_output=True).stdout)
    run = nbgrader(dest, "generate_assignment", "mha", "--force")
    assert run.returncode == 0, run.stdout[-2000:]
    return dest


def env(course: Path) -> dict:
    """The stock kernel imports that commit's mha_lib (first on its path), nbgrader the venv's tools."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(course / "stocklib")}


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env(course), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
