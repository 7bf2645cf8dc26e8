"""The student kit: everything a student needs to do the exercises with no server and no clone.

``make book`` (through the ``course_site`` extension) writes ``downloads/mha-student-kit.zip``
into the site. The zip holds one folder, ``mha-student-kit/``, with

* ``exercises/``: the seven released notebooks (``exercises/mha/*.ipynb``, no solutions);
* the course library as a wheel, built from ``pyproject.toml`` (every package it lists);
* ``requirements-student.txt``: exact pins, taken from the environment that built the site, of
  the packages a student needs (NumPy, PyTorch, Matplotlib, JupyterLab, nbgrader, ipykernel);
* ``HOWTO.md``: the commands in the order a student types them, per system (Linux, macOS,
  Windows), with the wheels' real names (Windows shells do not expand ``*.whl``), and what the
  install costs, as measured (:data:`INSTALL`);
* a second, tiny wheel, ``mha_student_settings``, that installs the kit's Jupyter settings into
  the student's virtual environment (``.venv/etc/jupyter``), so they apply from any folder:
  ``nbgrader validate`` prints only its result (no warning about a missing config file, none from
  the kernel about its transport); JupyterLab keeps the kit's folder as its root when it is given a
  notebook to open; and nbgrader's instructor tools (the Formgrader, course and assignment lists,
  the "Create Assignment" panel and the nbgrader menu) are switched off, the Validate button kept.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

KIT = "mha-student-kit"
STUDENT_PACKAGES = ("numpy", "torch", "matplotlib", "jupyterlab", "nbgrader", "ipykernel")
NBGRADER_CONFIG = """\
# nbgrader settings for the student kit (installed into .venv/etc/jupyter by mha_student_settings):
# `nbgrader validate` prints only its result, from any folder.
c = get_config()  # noqa: F821
c.ValidateApp.log_level = "WARN"                                 # not "Validating <path>"
c.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]    # not the kernel's transport warning
"""
# Jupyter server: the folder it is started in stays its root when it is given a notebook to open
# (by default the notebook's own folder, exercises/, would be), and nbgrader's instructor
# server extensions are off (`jupyter server extension disable` writes this same file).
SERVER_CONFIG = {"ServerApp": {"root_dir": ".", "jpserver_extensions": {
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.assignment_list": False,
}}}
# JupyterLab: nbgrader's instructor plugins off (`jupyter labextension disable` writes this file);
# @jupyter/nbgrader:validate-assignment, the notebook's Validate button, stays. Also off: the
# "get notified about official Jupyter news?" prompt, whose "Yes" fetches news from the internet.
PAGE_CONFIG = {"disabledExtensions": {
    **{f"@jupyter/nbgrader:{plugin}": True for plugin in ("create-assignment", "course-list", "assignment-list", "menu")},
    "@jupyterlab/apputils-extension:announcements": True}}
SETTINGS = ("mha_student_settings", "1.0")     # distribution name and version of the settings wheel
# The HOWTO's install figures, as measured by `make bench-kit` (bench/kit_install.py: Linux,
# Python 3.11, a fresh venv, an empty pip cache, everything from PyPI but PyTorch's CPU wheel, read
# from disk; 2 CPU cores shared with other jobs): 128 MB from PyPI + the 192 MB torch wheel;
# venv 1.32-1.34 GB; 1.3, 1.5, 3.8 and 3.9 minutes in four runs (the slow ones under heavy load).
INSTALL = {"download_mb": 320, "disk_gb": 1.3, "minutes": "1.5 to 4"}
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "_build", ".cache", "build", "*.egg-info",
                                     "__pycache__", ".pytest_cache", "node_modules")

HOWTO = """\
# Multi-head attention: the student kit

This folder is all you need for the course's seven graded exercises, on your own computer, with
no server and no account. You need Python 3.11 or newer. Open a terminal in this folder and type
the commands of your system, in this order.

## Linux

```bash
python3 -m venv .venv
.venv/bin/pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu
.venv/bin/pip install -r requirements-student.txt {wheel} {settings}
.venv/bin/jupyter lab exercises/01_project.ipynb
```

The second line installs the CPU build of PyTorch (about 200 MB); without it, the third line
would fetch the default build, several GB of NVIDIA libraries. With an NVIDIA GPU you may skip it.

## macOS

```bash
python3 -m venv .venv
.venv/bin/pip install -r requirements-student.txt {wheel} {settings}
.venv/bin/jupyter lab exercises/01_project.ipynb
```

## Windows (PowerShell or Command Prompt)

```
py -m venv .venv
.venv\\Scripts\\pip install -r requirements-student.txt {wheel} {settings}
.venv\\Scripts\\jupyter lab exercises\\01_project.ipynb
```

The install downloads about {download_mb} MB (PyTorch is 192 MB of it) and takes {disk_gb} GB of
disk. With a fast connection it took {minutes} minutes in our measurements (Linux, 2 CPU cores);
on a slower connection add the download's time (at 20 Mbit/s, {download_mb} MB take about
{slow_minutes} minutes).

`{wheel}` is the course library (`mha_lib`, the checks the visible tests use, and `mha_book`,
which the chapters' downloadable notebooks use for their figures and head viewers).
`{settings}` puts the kit's Jupyter settings into `.venv`: JupyterLab opens with this folder as
its root and shows the Validate button but not nbgrader's instructor tools, and
`nbgrader validate` prints only what you need to read, from any folder. The requirements file
pins NumPy, PyTorch, Matplotlib, JupyterLab and nbgrader to the versions the course was tested
with.

The chapters of the course site run here too: a chapter's download button gives its notebook;
put it in this folder and open it with `.venv/bin/jupyter lab` (Windows: `.venv\\Scripts\\jupyter lab`).

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


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def settings_wheel(dest: Path) -> Path:
    """The ``mha_student_settings`` wheel: no code, only data files that pip puts under the
    virtual environment's prefix (``etc/jupyter/...``), where Jupyter and nbgrader look first."""
    name, version = SETTINGS
    data = f"{name}-{version}.data/data/etc/jupyter"
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{data}/nbgrader_config.py": NBGRADER_CONFIG,
        f"{data}/jupyter_server_config.json": json.dumps(SERVER_CONFIG, indent=2) + "\n",
        f"{data}/labconfig/page_config.json": json.dumps(PAGE_CONFIG, indent=2) + "\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                            "Summary: Jupyter and nbgrader settings of the multi-head attention student kit\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: mha-course\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(text.encode())},{len(text.encode())}\n" for path, text in files.items())
    files[f"{dist}/RECORD"] = record + f"{dist}/RECORD,,\n"
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            z.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return wheel


def howto(wheel: str, settings: str, torch: str) -> str:
    slow_minutes = round(INSTALL["download_mb"] * 8 / 20 / 60)       # at 20 Mbit/s
    return HOWTO.format(wheel=wheel, settings=settings, torch=torch, slow_minutes=slow_minutes, **INSTALL)


#: Every entry of the kit is a plain file that anyone may read (rw-r--r--), whatever the mode of the
#: file it was copied from or the umask of the build: unzipped into a shared folder, it stays readable.
ENTRY_MODE = stat.S_IFREG | 0o644


def _add(z: zipfile.ZipFile, name: str, data: bytes, date_time: tuple) -> None:
    """One kit entry, compressed, with :data:`ENTRY_MODE`."""
    info = zipfile.ZipInfo(name, date_time=date_time)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ENTRY_MODE << 16                   # Unix mode in the high 16 bits
    z.writestr(info, data)


def _add_file(z: zipfile.ZipFile, path: Path, name: str) -> None:
    _add(z, name, path.read_bytes(), time.localtime(path.stat().st_mtime)[:6])


def build_kit(root: Path, out_zip: Path) -> Path:
    notebooks = sorted((root / "exercises" / "mha").glob("*.ipynb"))
    if not notebooks:
        raise RuntimeError("no exercise notebooks in exercises/mha/ (run `make release`)")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(root, Path(tmp) / "library")
        settings = settings_wheel(Path(tmp))
        out_zip.parent.mkdir(parents=True, exist_ok=True)
        torch = importlib.metadata.version("torch").split("+")[0]
        now = time.localtime()[:6]
        with zipfile.ZipFile(out_zip, "w") as z:
            for nb in notebooks:
                _add_file(z, nb, f"{KIT}/exercises/{nb.name}")
            _add_file(z, wheel, f"{KIT}/{wheel.name}")
            _add_file(z, settings, f"{KIT}/{settings.name}")
            _add(z, f"{KIT}/requirements-student.txt", requirements().encode(), now)
            _add(z, f"{KIT}/HOWTO.md", howto(wheel.name, settings.name, torch).encode(), now)
            if (root / "LICENSE").is_file():
                _add_file(z, root / "LICENSE", f"{KIT}/LICENSE")
    return out_zip
