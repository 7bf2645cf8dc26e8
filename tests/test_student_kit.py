"""The student kit that the site's Exercises page offers (made by `make book`, site/student_kit.py).

A student downloads one zip, makes a fresh virtual environment, installs the pinned packages and
the kit's two wheels, and validates an exercise: that whole path is run here, once, in a fresh
venv outside the repository (pip's cache makes the install take about a minute), and then in it:
the chapters' downloaded notebooks, and the kit's JupyterLab in a real browser.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import venv
import zipfile
from pathlib import Path
from types import SimpleNamespace
from urllib.error import HTTPError
from urllib.request import urlopen

import pytest

from submissions import kit as course

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("MHA_SITE") or ROOT / "_build" / "html")
KIT = SITE / "downloads" / "mha-student-kit.zip"
EXERCISE = "02_split_heads"    # NumPy only: the quickest to validate
SETTINGS = "mha_student_settings"

sys.path.insert(0, str(ROOT / "site"))
import student_kit  # noqa: E402

needs_kit = pytest.mark.skipif(not KIT.is_file(), reason=f"{KIT} does not exist: run `make book`")


def _members() -> list[str]:
    with zipfile.ZipFile(KIT) as z:
        return z.namelist()


def _wheels() -> tuple[str, str]:
    """(the course library's wheel, the settings wheel), as named in the kit."""
    names = [Path(n).name for n in _members() if n.endswith(".whl")]
    settings = [n for n in names if n.startswith(SETTINGS + "-")]
    library = [n for n in names if n not in settings]
    assert len(library) == 1 and len(settings) == 1, names
    return library[0], settings[0]


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """The kit unzipped and installed as HOWTO.md says, in a fresh venv; its environment."""
    if not KIT.is_file():
        pytest.skip(f"{KIT} does not exist: run `make book`")
    tmp = tmp_path_factory.mktemp("kit")
    with zipfile.ZipFile(KIT) as z:
        z.extractall(tmp)
    home = tmp / "mha-student-kit"
    env_dir = home / ".venv"
    (tmp / "home").mkdir()
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": str(tmp / "home"),     # no user-level Jupyter settings
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "PYTHONUNBUFFERED": "1",
           "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")}
    for key in ("PYTHONPATH", "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "VIRTUAL_ENV"):
        env.pop(key, None)
    install = subprocess.run([str(bin_dir / "pip"), "install", "--quiet", "-r", "requirements-student.txt",
                              *_wheels()], cwd=home, env=env, capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return SimpleNamespace(home=home, env_dir=env_dir, bin=bin_dir, env=env, tmp=tmp)


@needs_kit
def test_kit_holds_the_exercises_the_library_its_settings_and_a_howto_but_no_solution():
    names = _members()
    released = sorted(p.name for p in (ROOT / "exercises" / "mha").glob("*.ipynb"))
    assert sorted(Path(n).name for n in names if n.endswith(".ipynb")) == released
    assert {"mha-student-kit/HOWTO.md", "mha-student-kit/requirements-student.txt"} <= set(names)
    library, settings = _wheels()
    with zipfile.ZipFile(KIT) as z:
        with z.open(f"mha-student-kit/{library}") as fh, zipfile.ZipFile(fh) as wheel:
            packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in wheel.namelist() if n.endswith("/__init__.py")}
        with z.open(f"mha-student-kit/{settings}") as fh, zipfile.ZipFile(fh) as wheel:
            data = {n.split(".data/data/", 1)[1] for n in wheel.namelist() if ".data/data/" in n}
        everything = "\n".join(z.read(n).decode("utf-8", "replace") for n in names if not n.endswith(".whl"))
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {})
    listed = setuptools.get("packages") if isinstance(setuptools.get("packages"), list) else []
    # mha_book: the chapters' downloaded notebooks import it (plotting, head viewers, toy model)
    assert {"mha_lib", "mha_book", *listed} <= packages, f"the wheel lacks {({'mha_lib', 'mha_book', *listed}) - packages}"
    assert data == {"etc/jupyter/nbgrader_config.py", "etc/jupyter/jupyter_server_config.json",
                    "etc/jupyter/labconfig/page_config.json"}, data
    assert "BEGIN SOLUTION" not in everything and "BEGIN HIDDEN TESTS" not in everything


@needs_kit
def test_every_entry_unzips_as_a_file_anyone_can_read():
    """Unzipped into a folder shared with a class (or by an instructor), every file of the kit is
    rw-r--r--: none keeps the mode of a build's temporary file (0600), none is executable."""
    with zipfile.ZipFile(KIT) as z:
        modes = {info.filename: info.external_attr >> 16 for info in z.infolist()}
    wrong = {name: oct(mode) for name, mode in modes.items() if mode != student_kit.ENTRY_MODE}
    assert student_kit.ENTRY_MODE == 0o100644 and len(modes) >= 9
    assert not wrong, f"entries whose mode is not 0o100644 (a regular file, rw-r--r--): {wrong}"


@needs_kit
def test_student_requirements_are_exact_pins_of_the_course_lock():
    with zipfile.ZipFile(KIT) as z:
        text = z.read("mha-student-kit/requirements-student.txt").decode()
    pins = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    lock = set((ROOT / "requirements.txt").read_text().splitlines())
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", p) for p in pins), pins
    assert "torch==2.13.0" in pins
    assert set(pins) <= lock, f"not in requirements.txt: {set(pins) - lock}"
    assert {p.split("==")[0] for p in pins} >= {"numpy", "torch", "jupyterlab", "nbgrader", "matplotlib"}


@needs_kit
def test_kit_installs_in_a_fresh_venv_and_validates_an_exercise_from_any_folder(kit):
    where = subprocess.run([str(kit.bin / "python"), "-c", "import mha_lib, mha_book; print(mha_lib.__file__, mha_book.__file__)"],
                           cwd=kit.tmp, env=kit.env, capture_output=True, text=True)
    assert where.stdout.count(str(kit.env_dir)) == 2, "not from the kit's wheel: " + where.stdout + where.stderr

    notebook = kit.home / "exercises" / f"{EXERCISE}.ipynb"
    untouched = notebook.read_text()
    solved = json.loads(untouched)
    answers = course.solution_cells(EXERCISE)
    for cell in solved["cells"]:
        if course.grade_id(cell) in answers:
            cell["source"] = answers[course.grade_id(cell)]

    def validate(nb_text: str, folder: Path) -> str:
        notebook.write_text(nb_text)
        run = subprocess.run([str(kit.bin / "nbgrader"), "validate", os.path.relpath(notebook, folder)], cwd=folder,
                             env=kit.env, capture_output=True, text=True, timeout=600)
        return run.stdout + run.stderr

    # from the kit's folder, as HOWTO.md says, and from exercises/ (JupyterLab's terminal, a cd):
    # the settings come from the venv, so no "No nbgrader_config.py file found" anywhere
    for folder in (kit.home, kit.home / "exercises"):
        solved_out = validate(json.dumps(solved), folder)
        assert solved_out.strip() == "Success! Your notebook passes all the tests.", (folder, solved_out[-3000:])
        unsolved_out = validate(untouched, folder)
        assert "VALIDATION FAILED" in unsolved_out and "ModuleNotFoundError" not in unsolved_out, unsolved_out[-3000:]
        assert "nbgrader_config" not in unsolved_out, unsolved_out[-3000:]
    notebook.write_text(untouched)


@needs_kit
def test_the_howto_states_the_disk_the_install_takes(kit):
    """HOWTO.md's disk figure is the kit's installed venv's size, within 15 % (the time and the
    download are measured by `make bench-kit`, not here)."""
    size_gb = sum(p.stat().st_size for p in kit.env_dir.rglob("*") if p.is_file() and not p.is_symlink()) / 1e9
    howto = (kit.home / "HOWTO.md").read_text()
    stated = float(re.search(r"takes ([\d.]+) GB of\s+disk", howto).group(1))
    assert stated == student_kit.INSTALL["disk_gb"]
    assert abs(size_gb - stated) <= 0.15 * stated, f"HOWTO.md says {stated} GB, the venv is {size_gb:.2f} GB"


@needs_kit
def test_downloaded_chapters_run_in_the_kits_environment(kit):
    """Every chapter's .ipynb download, executed afresh in the kit's venv (its own kernel, no
    course repository on the path): no cell fails, and the course packages it imports are the
    kit's."""
    notebooks = sorted((SITE / "_sources" / "chapters").glob("*.ipynb"))
    assert len(notebooks) >= 7, notebooks
    work = kit.tmp / "chapters"
    work.mkdir()
    probe = ("import mha_lib, mha_book\n"
             "print('course packages from', mha_lib.__file__, mha_book.__file__)")
    failures = []
    for source in notebooks:
        nb = json.loads(source.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        nb["cells"].append({"cell_type": "code", "metadata": {}, "source": probe, "outputs": [],
                            "execution_count": None})
        (work / source.name).write_text(json.dumps(nb), encoding="utf-8")
        run = subprocess.run([str(kit.bin / "jupyter"), "nbconvert", "--to", "notebook", "--execute", "--inplace",
                              "--ExecutePreprocessor.timeout=600", source.name], cwd=work, env=kit.env,
                             capture_output=True, text=True, timeout=1800)
        if run.returncode:
            failures.append(f"{source.name}: {run.stderr[-1500:]}")
            continue
        done = json.loads((work / source.name).read_text(encoding="utf-8"))
        last = "".join("".join(o.get("text", "")) for o in done["cells"][-1]["outputs"])   # text: str or lines
        if last.count(str(kit.env_dir)) != 2:
            failures.append(f"{source.name}: course packages not from the kit: {last!r}")
    assert not failures, "\n".join(failures)


def _start_lab(kit) -> tuple[subprocess.Popen, str, str]:
    """The kit's JupyterLab as HOWTO.md starts it (with a notebook to open), on loopback: the
    server, its address and its token."""
    token = os.urandom(12).hex()
    runtime = Path(kit.env["JUPYTER_RUNTIME_DIR"])
    server = subprocess.Popen([str(kit.bin / "jupyter"), "lab", "--no-browser", "--allow-root",
                               "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", f"--IdentityProvider.token={token}",
                               "exercises/01_project.ipynb"], cwd=kit.home, env=kit.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for info in runtime.glob("jpserver-*.json"):
            data = json.loads(info.read_text() or "{}")
            if data.get("pid") == server.pid and data.get("port"):
                return server, f"http://127.0.0.1:{data['port']}/", token
        if server.poll() is not None:
            raise AssertionError(f"jupyter lab ended: {server.stderr.read()[-3000:]}")
        time.sleep(0.5)
    os.killpg(server.pid, signal.SIGTERM)
    raise AssertionError("jupyter lab did not start within 120 s")


@needs_kit
def test_the_kits_jupyterlab_is_rooted_in_the_kit_and_shows_no_instructor_tools(kit):
    """`jupyter lab exercises/01_project.ipynb` (HOWTO.md) serves the kit's folder, not exercises/,
    and a student sees the Validate button but none of nbgrader's instructor tools: no nbgrader
    menu (Formgrader, course list), no "Create Assignment" panel, no formgrader pages."""
    from test_site import chromium_path, launch_chromium

    server, base, token = _start_lab(kit)
    try:
        root = json.loads(urlopen(f"{base}api/contents?token={token}", timeout=30).read())
        assert {"exercises", "HOWTO.md"} <= {item["name"] for item in root["content"]}, root["content"]
        for page in ("formgrader", "assignments", "courses"):
            with pytest.raises(HTTPError) as refused:
                urlopen(f"{base}{page}?token={token}", timeout=30)
            assert refused.value.code == 404, (page, refused.value.code)
        exe = chromium_path()
        if exe is None:
            pytest.skip("Debian's Chromium is not installed (`make browser`)")
        with launch_chromium(exe) as chromium:
            page = chromium.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base}lab/tree/exercises/01_project.ipynb?token={token}")
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
            page.locator("button:has-text('Validate'), jp-button:has-text('Validate')").first.wait_for(timeout=30_000)
            menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
            assert menus and "Nbgrader" not in menus, menus
            page.locator(".jp-Cell").first.click()       # the panel would list this cell's type
            sidebars = page.locator(".jp-SideBar [title], .jp-SideBar [data-id]").evaluate_all(
                "es => es.map(e => (e.getAttribute('title') || '') + ' ' + (e.dataset.id || ''))")
            assert sidebars and not [s for s in sidebars if re.search(r"create.assignment|nbgrader", s, re.I)], sidebars
            text = page.locator("body").inner_text()
            assert "Create Assignment" not in text and "official Jupyter news" not in text
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@needs_kit
def test_howto_gives_each_system_its_commands_in_typing_order_with_the_real_wheel_names():
    with zipfile.ZipFile(KIT) as z:
        howto = z.read("mha-student-kit/HOWTO.md").decode()
    library, settings = _wheels()
    assert "*" not in re.sub(r"\*\*?[^*\n]+\*\*?", "", howto), "a glob (or stray *) in HOWTO.md"
    blocks = dict(re.findall(r"^## (Linux|macOS|Windows)[^\n]*\n\n```[a-z]*\n(.*?)```", howto, re.S | re.M))
    assert set(blocks) == {"Linux", "macOS", "Windows"}, list(blocks)
    for system, block in blocks.items():
        lines = block.strip().splitlines()
        requirements = next(i for i, line in enumerate(lines) if "-r requirements-student.txt" in line)
        assert lines[requirements].endswith(f" {library} {settings}"), (system, lines[requirements])
        assert "venv" in lines[0] and "jupyter lab" in lines[-1], (system, lines)
        if system == "Linux":    # the CPU build before the requirements pull the default (CUDA) one
            cpu = next(i for i, line in enumerate(lines) if "download.pytorch.org/whl/cpu" in line)
            assert cpu < requirements and "torch==2.13.0" in lines[cpu]
    figures = student_kit.INSTALL
    assert f"about {figures['download_mb']} MB" in howto and f"took {figures['minutes']} minutes" in howto
    exercises = (ROOT / "chapters" / "exercises.md").read_text()
    assert library in exercises and settings in exercises and "*.whl" not in exercises
