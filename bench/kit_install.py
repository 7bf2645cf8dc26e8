"""What installing the student kit costs a student: time, download and disk (the HOWTO's figures).

Follows HOWTO.md's Linux lines in a fresh virtual environment with an empty pip cache, every
package from PyPI as a student's pip would fetch it (this machine's pip configuration and local
mirrors switched off), except PyTorch's CPU wheel: the HOWTO takes it from PyTorch's own index
(``download.pytorch.org``); pass ``--torch-wheels DIR`` to take it from a folder instead where
that index is out of reach (its size is then added to the download, its transfer time is not).

    make bench-kit          # after make book: the kit is _build/html/downloads/mha-student-kit.zip

Prints a table; compare it with ``student_kit.INSTALL`` (what HOWTO.md says). Network speed
decides most of the time: say where and when you measured.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "_build" / "html" / "downloads" / "mha-student-kit.zip"
DOWNLOADED = re.compile(r"Downloading \S+ \(([\d.]+) (kB|MB|GB)\)")
UNIT = {"kB": 1e3, "MB": 1e6, "GB": 1e9}


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def pip(env_dir: Path, args: list[str], cwd: Path, env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    run = subprocess.run([str(env_dir / "bin" / "pip"), "install", "--progress-bar", "off", *args],
                         cwd=cwd, env=env, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"pip install {' '.join(args)} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return time.perf_counter() - start, run.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kit", type=Path, default=KIT)
    parser.add_argument("--torch-wheels", type=Path, help="a folder holding torch's CPU wheel")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with zipfile.ZipFile(args.kit) as z:
            z.extractall(tmp)
        home = tmp / "mha-student-kit"
        wheels = sorted(p.name for p in home.glob("*.whl"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_CACHE_DIR=str(tmp / "pip-cache"),
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        torch_pin = next(line for line in (home / "requirements-student.txt").read_text().splitlines()
                         if line.startswith("torch=="))
        torch_source = (["--find-links", str(args.torch_wheels)] if args.torch_wheels
                        else ["--index-url", "https://download.pytorch.org/whl/cpu"])
        start = time.perf_counter()
        venv.create(home / ".venv", with_pip=True)
        made = time.perf_counter() - start
        torch_s, torch_log = pip(home / ".venv", [torch_pin, *torch_source], home, env)
        rest_s, rest_log = pip(home / ".venv", ["-r", "requirements-student.txt", *wheels], home, env)
        total = time.perf_counter() - start
        downloaded = sum(float(n) * UNIT[u] for n, u in DOWNLOADED.findall(torch_log + rest_log))
        local = sum(p.stat().st_size for p in args.torch_wheels.glob("torch-*.whl")) if args.torch_wheels else 0
        rows = [("fresh venv", f"{made:6.1f} s"), ("torch (CPU build)", f"{torch_s:6.1f} s"),
                ("requirements + wheels", f"{rest_s:6.1f} s"), ("total", f"{total:6.1f} s"),
                ("downloaded from PyPI", f"{downloaded / 1e6:6.0f} MB"),
                ("torch wheel from a folder", f"{local / 1e6:6.0f} MB" if local else "-"),
                ("venv on disk", f"{folder_size(home / '.venv') / 1e9:6.2f} GB")]
        print(f"student kit install ({args.kit.name}, {', '.join(wheels)})")
        for name, value in rows:
            print(f"  {name:28s}{value}")


if __name__ == "__main__":
    main()
