"""The student kit: everything a student needs to do the exercises with no server and no clone.

``make book`` (through the ``course_site`` extension) writes ``downloads/mha-student-kit.zip``
into the site. The zip holds one folder, ``mha-student-kit/``, with

* ``exercises/``: the five released notebooks (``exercises/mha/*.ipynb``, no solutions);
* the course library as a wheel, built from ``pyproject.toml`` (every package it lists);
* ``requirements-student.txt``: exact pins, taken from the environment that built the site, of
  the packages a student needs (NumPy, PyTorch, Matplotlib, JupyterLab, nbgrader, ipykernel);
* ``HOWTO.md``: the commands in the order a student types them, per system (Linux, macOS,
  Windows), with the wheel's real name (Windows shells do not expand ``*.whl``);
* ``nbgrader_config.py``: ``nbgrader validate`` run in the kit's folder prints only the result
  (no warning about a missing config file, none from the kernel about its transport).
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
NBGRADER_CONFIG = """\
# nbgrader settings for the student kit: `nbgrader validate`, run in this folder, prints only its result.
c = get_config()  # noqa: F821
c.ValidateApp.log_level = "WARN"                                 # not "Validating <path>"
c.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]    # not the kernel's transport warning
"""
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "_build", ".cache", "build", "*.egg-info",
                                     "__pycache__", ".pytest_cache", "node_modules")

HOWTO = """\
# Multi-head attention: the student kit

This folder is all you need for the course's five graded exercises, on your own computer, with
no server and no account. You need Python 3.11 or newer. Open a terminal in this folder and type
the commands of your system, in this order.

## Linux

```bash
python3 -m venv .venv
.venv/bin/pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu
.venv/bin/pip install -r requirements-student.txt {wheel}
.venv/bin/jupyter lab exercises/01_project.ipynb
```

The second line installs the CPU build of PyTorch (about 200 MB); without it, the third line
would fetch the default build, several GB of NVIDIA libraries. With an NVIDIA GPU you may skip it.

## macOS

```bash
python3 -m venv .venv
.venv/bin/pip install -r requirements-student.txt {wheel}
.venv/bin/jupyter lab exercises/01_project.ipynb
```

## Windows (PowerShell or Command Prompt)

```
py -m venv .venv
.venv\\Scripts\\pip install -r requirements-student.txt {wheel}
.venv\\Scripts\\jupyter lab exercises\\01_project.ipynb
```

The install takes about 2 minutes. `{wheel}` is the course library (`mha_lib` and the checks the
visible tests use); the requirements file pins NumPy, PyTorch, Matplotlib, JupyterLab and
nbgrader to the versions the course was tested with.

## Write, check, hand in

1. In each exercise, write each function where it says `# YOUR CODE HERE` and delete
   `raise NotImplementedError()`. The *try it* cell below each part is yours to experiment in.
   Run a test cell: each check that passes prints a line starting with `PASSED:`; one that fails
   prints a sentence saying what is wrong.
2. Run *Kernel -> Restart Kernel and Run All Cells*, then press **Validate** in the notebook
   toolbar. Or, in the terminal (Windows: `.venv\\Scripts\\nbgrader validate exercises\\01_project.ipynb`):

   ```bash
   .venv/bin/nbgrader validate exercises/01_project.ipynb
   ```

   It prints `Success! Your notebook passes all the tests.`, or every visible test that fails
   with its sentence. It always exits with status 0: read what it prints. Passing the visible
   tests is a start, not a grade: hidden tests with other sizes and seeds decide the grade.
3. Hand in the `.ipynb` files as your instructor tells you (keep their names). Test cells you
   edited or deleted are restored before grading.

`nbgrader_config.py` (in this folder, where you run these commands) keeps `nbgrader validate` to
what you need to read.
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
            z.writestr(f"{KIT}/nbgrader_config.py", NBGRADER_CONFIG)
            if (root / "LICENSE").is_file():
                z.write(root / "LICENSE", f"{KIT}/LICENSE")
    return out_zip
