"""The student kit: everything a student needs to do the exercises with no server and no clone.

``make book`` (through the ``course_site`` extension) writes ``downloads/mha-student-kit.zip``
into the site. The zip holds one folder, ``mha-student-kit/``, with

* ``exercises/``: the five released notebooks (``exercises/mha/*.ipynb``, no solutions);
* the course library as a wheel, built from ``pyproject.toml`` (every package it lists);
* ``requirements-student.txt``: exact pins, taken from the environment that built the site, of
  the packages a student needs (NumPy, PyTorch, Matplotlib, JupyterLab, nbgrader, ipykernel);
* ``HOWTO.md``: set up, open, validate, hand in.
"""
from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

KIT = "mha-student-kit"
STUDENT_PACKAGES = ("numpy", "torch", "matplotlib", "jupyterlab", "nbgrader", "ipykernel")
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "_build", ".cache", "build", "*.egg-info",
                                     "__pycache__", ".pytest_cache", "node_modules")

HOWTO = """\
# Multi-head attention: the student kit

This folder is all you need for the course's five graded exercises, on your own computer, with
no server and no account. You need Python 3.11 or newer.

## 1. Install (once, about 2 minutes)

In a terminal, in this folder:

```bash
python3 -m venv .venv
.venv/bin/pip install -r requirements-student.txt {wheel}
```

On Windows write `.venv\\Scripts\\pip` instead of `.venv/bin/pip` (and likewise below).
On Linux without an NVIDIA GPU, install the much smaller CPU build of PyTorch first:
`.venv/bin/pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu`.

The wheel is the course library (`mha_lib` and the checks the visible tests use); the
requirements file pins NumPy, PyTorch, Matplotlib, JupyterLab and nbgrader to the versions the
course was tested with.

## 2. Open an exercise

```bash
.venv/bin/jupyter lab exercises/01_project.ipynb
```

Write each function where it says `# YOUR CODE HERE` and delete `raise NotImplementedError()`.
The *try it* cell below each part is yours to experiment in.

## 3. Check your work

Run *Kernel -> Restart Kernel and Run All Cells*, then press **Validate** in the notebook
toolbar. Or, in a terminal:

```bash
.venv/bin/nbgrader validate exercises/01_project.ipynb
```

It lists every visible test that fails, with a sentence saying what is wrong. It always exits
with status 0: read what it prints. Passing the visible tests is a start, not a grade: hidden
tests with other sizes and seeds decide the grade.

## 4. Hand in

Hand in the `.ipynb` files as your instructor tells you (keep their names). Test cells you
edited or deleted are restored before grading.
"""


def _pin(name: str) -> str:
    version = importlib.metadata.version(name).split("+")[0]   # torch 2.13.0+cpu -> 2.13.0
    return f"{name}=={version}"


def requirements() -> str:
    pins = "\n".join(_pin(name) for name in STUDENT_PACKAGES)
    return ("# The packages a student needs, pinned to the versions the course was built and tested\n"
            "# with. Install together with the course library's wheel (see HOWTO.md).\n" + pins + "\n")


def build_wheel(root: Path, dest: Path) -> Path:
    """The course library as a wheel, from a clean copy of the repository's pyproject.toml."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(root, src, ignore=_NOT_SOURCE)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-build-isolation", "--wheel-dir", str(dest), str(src)],
                       check=True, stdout=subprocess.DEVNULL)
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]


def build_kit(root: Path, out_zip: Path) -> Path:
    notebooks = sorted((root / "exercises" / "mha").glob("*.ipynb"))
    if not notebooks:
        raise RuntimeError("no exercise notebooks in exercises/mha/ (run `make release`)")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(root, Path(tmp))
        out_zip.parent.mkdir(parents=True, exist_ok=True)
        torch = importlib.metadata.version("torch").split("+")[0]
        with zipfile.ZipFile(out_zip, "w", zipfile.ZIP_DEFLATED) as z:
            for nb in notebooks:
                z.write(nb, f"{KIT}/exercises/{nb.name}")
            z.write(wheel, f"{KIT}/{wheel.name}")
            z.writestr(f"{KIT}/requirements-student.txt", requirements())
            z.writestr(f"{KIT}/HOWTO.md", HOWTO.format(wheel=wheel.name, torch=torch))
            if (root / "LICENSE").is_file():
                z.write(root / "LICENSE", f"{KIT}/LICENSE")
    return out_zip
