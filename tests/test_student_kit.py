"""The student kit that the site's Exercises page offers (made by `make book`, site/student_kit.py).

A student downloads one zip, makes a fresh virtual environment, installs the pinned packages and
the course library's wheel, and validates an exercise: that whole path is run here, in a fresh
venv outside the repository (pip's cache makes the install take about a minute).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from submissions import kit as course

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "_build" / "html" / "downloads" / "mha-student-kit.zip"
EXERCISE = "02_split_heads"    # NumPy only: the quickest to validate

needs_kit = pytest.mark.skipif(not KIT.is_file(), reason=f"{KIT} does not exist: run `make book`")


def _members() -> list[str]:
    with zipfile.ZipFile(KIT) as z:
        return z.namelist()


@needs_kit
def test_kit_holds_the_exercises_the_library_and_a_howto_but_no_solution():
    names = _members()
    released = sorted(p.name for p in (ROOT / "exercises" / "mha").glob("*.ipynb"))
    assert sorted(Path(n).name for n in names if n.endswith(".ipynb")) == released
    assert {"mha-student-kit/HOWTO.md", "mha-student-kit/requirements-student.txt"} <= set(names)
    with zipfile.ZipFile(KIT) as z:
        wheels = [n for n in names if n.endswith(".whl")]
        assert len(wheels) == 1, wheels
        with z.open(wheels[0]) as fh, zipfile.ZipFile(fh) as wheel:
            packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in wheel.namelist() if n.endswith("/__init__.py")}
        everything = "\n".join(z.read(n).decode("utf-8", "replace") for n in names if not n.endswith(".whl"))
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {})
    listed = setuptools.get("packages") if isinstance(setuptools.get("packages"), list) else []
    assert {"mha_lib", *listed} <= packages, f"the wheel lacks {({'mha_lib', *listed}) - packages}"
    assert "BEGIN SOLUTION" not in everything and "BEGIN HIDDEN TESTS" not in everything


@needs_kit
def test_student_requirements_are_exact_pins_of_the_course_lock():
    with zipfile.ZipFile(KIT) as z:
        text = z.read("mha-student-kit/requirements-student.txt").decode()
    pins = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    lock = set((ROOT / "requirements.txt").read_text().splitlines())
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", p) for p in pins), pins
    assert "torch==2.13.0" in pins
    assert set(pins) <= lock, f"not in requirements.txt: {set(pins) - lock}"
    assert {p.split("==")[0] for p in pins} >= {"numpy", "torch", "jupyterlab", "nbgrader"}


@needs_kit
def test_kit_installs_in_a_fresh_venv_and_validates_an_exercise(tmp_path):
    with zipfile.ZipFile(KIT) as z:
        z.extractall(tmp_path)
    home = tmp_path / "mha-student-kit"
    env_dir = home / ".venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    wheel = next(home.glob("*.whl"))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    install = subprocess.run([str(bin_dir / "pip"), "install", "--quiet", "-r", "requirements-student.txt",
                              wheel.name], cwd=home, env=env, capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    where = subprocess.run([str(bin_dir / "python"), "-c", "import mha_lib; print(mha_lib.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert str(env_dir) in where.stdout, "mha_lib does not come from the kit's wheel: " + where.stdout + where.stderr

    notebook = home / "exercises" / f"{EXERCISE}.ipynb"
    untouched = notebook.read_text()
    solved = json.loads(untouched)
    answers = course.solution_cells(EXERCISE)
    for cell in solved["cells"]:
        if course.grade_id(cell) in answers:
            cell["source"] = answers[course.grade_id(cell)]

    def validate(nb_text: str) -> str:     # as HOWTO.md says: from the kit's folder
        notebook.write_text(nb_text)
        run = subprocess.run([str(bin_dir / "nbgrader"), "validate", f"exercises/{notebook.name}"], cwd=home,
                             env=env, capture_output=True, text=True, timeout=600)
        return run.stdout + run.stderr

    solved_out = validate(json.dumps(solved))
    assert solved_out.strip() == "Success! Your notebook passes all the tests.", solved_out[-3000:]
    unsolved_out = validate(untouched)
    assert "VALIDATION FAILED" in unsolved_out and "ModuleNotFoundError" not in unsolved_out, unsolved_out[-3000:]


@needs_kit
def test_howto_gives_each_system_its_commands_in_typing_order_with_the_real_wheel_name():
    with zipfile.ZipFile(KIT) as z:
        howto = z.read("mha-student-kit/HOWTO.md").decode()
        wheel = next(Path(n).name for n in z.namelist() if n.endswith(".whl"))
        assert "mha-student-kit/nbgrader_config.py" in z.namelist()
    assert "*" not in re.sub(r"\*\*?[^*\n]+\*\*?", "", howto), "a glob (or stray *) in HOWTO.md"
    blocks = dict(re.findall(r"^## (Linux|macOS|Windows)[^\n]*\n\n```[a-z]*\n(.*?)```", howto, re.S | re.M))
    assert set(blocks) == {"Linux", "macOS", "Windows"}, list(blocks)
    for system, block in blocks.items():
        lines = block.strip().splitlines()
        requirements = next(i for i, line in enumerate(lines) if "-r requirements-student.txt" in line)
        assert lines[requirements].endswith(" " + wheel), (system, lines[requirements])
        assert "venv" in lines[0] and "jupyter lab" in lines[-1], (system, lines)
        if system == "Linux":    # the CPU build before the requirements pull the default (CUDA) one
            cpu = next(i for i, line in enumerate(lines) if "download.pytorch.org/whl/cpu" in line)
            assert cpu < requirements and "torch==2.13.0" in lines[cpu]
    exercises = (ROOT / "chapters" / "exercises.md").read_text()
    assert wheel in exercises and "*.whl" not in exercises
