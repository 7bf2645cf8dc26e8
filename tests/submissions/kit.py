"""Build submissions from the course's notebooks and grade them with the real nbgrader commands.

A submission is the student version of a notebook (what ``nbgrader generate_assignment`` put in
exercises/mha/) with its solution cells filled in: by the reference answer (the solution cell of
solutions/mha/ without its BEGIN/END SOLUTION markers), or by a recipe's own code.
"""
import copy
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "mha"
BIN = Path(sys.executable).parent
NOTEBOOKS = sorted(p.stem for p in (REPO / "solutions" / ASSIGNMENT).glob("*.ipynb"))


def env() -> dict:
    """nbgrader runs `alembic` and the kernel from PATH: put the venv first."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}


def nbgrader(course: Path, *args: str, timeout: float = 900, log: Path | None = None):
    """Run ``nbgrader <args>`` in ``course``: the CompletedProcess (stdout and stderr merged), or,
    with ``log``, the running Popen writing to that file (several can then run side by side)."""
    cmd = [str(BIN / "nbgrader"), *args]
    if log is not None:
        with open(log, "w") as fh:
            return subprocess.Popen(cmd, cwd=course, env=env(), stdout=fh, stderr=subprocess.STDOUT)
    return subprocess.run(cmd, cwd=course, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def make_course(dest: Path, config: str = "") -> Path:
    """A fresh course directory: our config (and ``config``'s lines after it) and sources, released there (which
    fills its gradebook)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", dest)
    if config:
        with open(dest / "nbgrader_config.py", "a") as fh:
            fh.write("\n" + config)
    shutil.copytree(REPO / "solutions", dest / "solutions")
    run = nbgrader(dest, "generate_assignment", ASSIGNMENT, "--force")
    assert run.returncode == 0, run.stdout
    return dest


def read(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def solution_cells(notebook: str) -> dict[str, str]:
    """The reference answer of every solution cell, by grade_id, without the SOLUTION markers."""
    nb = read(REPO / "solutions" / ASSIGNMENT / f"{notebook}.ipynb")
    return {c["metadata"]["nbgrader"]["grade_id"]: "".join(
        line for line in _lines(c) if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
        for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")}


def _lines(cell) -> list[str]:
    src = cell["source"]
    return src if isinstance(src, list) else src.splitlines(keepends=True)


def grade_id(cell) -> str | None:
    return cell["metadata"].get("nbgrader", {}).get("grade_id")


def release(course: Path, notebook: str) -> dict:
    return read(course / "exercises" / ASSIGNMENT / f"{notebook}.ipynb")


def filled(course: Path, notebook: str, answers: dict[str, str] | None = None, solve: bool = True) -> dict:
    """The student version with its solution cells filled: ``answers`` first, else the reference (if solve)."""
    nb = copy.deepcopy(release(course, notebook))
    reference = solution_cells(notebook)
    answers = answers or {}
    unknown = set(answers) - set(reference)
    assert not unknown, f"no solution cell {unknown} in {notebook}"
    for cell in nb["cells"]:
        gid = grade_id(cell)
        if gid in reference and (gid in answers or solve):
            cell["source"] = answers.get(gid, reference[gid]).strip("\n") + "\n"
    return nb


def submit(course: Path, student: str, files: dict[str, dict | bytes | str]) -> None:
    """Write a student's submitted notebooks (a notebook dict, or raw bytes/text for broken files)."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / f"{name}.ipynb"
        if isinstance(content, dict):
            path.write_text(json.dumps(content, indent=1))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def scores(course: Path) -> dict[str, dict[str, dict[str, float | None]]]:
    """{student: {notebook: {grade cell: score}}} from the gradebook (None: never graded)."""
    from nbgrader.api import Gradebook
    out: dict = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for submission in gb.assignment_submissions(ASSIGNMENT):
            per_nb = out.setdefault(submission.student.id, {})
            for nb in submission.notebooks:
                per_nb[nb.name] = {g.name: g.score if (g.auto_score is not None or g.manual_score is not None)
                                   else None for g in nb.grades}
                per_nb[nb.name]["needs_manual_grade"] = nb.needs_manual_grade
    return out


def max_scores(course: Path) -> dict[str, dict[str, float]]:
    """{notebook: {grade cell: points}}."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assignment = gb.find_assignment(ASSIGNMENT)
        return {nb.name: {c.name: c.max_score for c in nb.grade_cells} for nb in assignment.notebooks}


def feedback_text(course: Path, student: str, notebook: str) -> str | None:
    """The feedback HTML of one notebook as plain text, or None when there is none."""
    path = course / "feedback" / student / ASSIGNMENT / f"{notebook}.html"
    return html_text(path) if path.exists() else None


def html_text(path: Path) -> str:
    """An HTML file as plain text: styles and scripts dropped, tags dropped, entities decoded.

    Runs of one repeated character (a 100 MB print) are shortened first, so this stays fast.
    """
    raw = re.sub(r"(.)\1{1000,}+", lambda m: m.group(1) * 10, path.read_text())
    raw = re.sub(r"<style.*?</style>|<script.*?</script>", "", raw, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", raw))




def mutant_notebook(course: Path, mutant) -> dict:
    return filled(course, mutant.notebook, {mutant.cell: mutant.answer(solution_cells(mutant.notebook)[mutant.cell])})






# --------------------------------------------------------------------------------------------
# Grading with the course's own command (python -m mha_grader), as `make grade` runs it
# --------------------------------------------------------------------------------------------

def grader_env(secret_file: Path) -> dict:
    return {**env(), "MHA_GRADER_SECRET": str(secret_file), "PYTHONPATH": str(REPO)}


WITHOUT_RULE = REPO / "tests" / "submissions" / "without_static_rule.py"  # the grader, its static rule off


def grade(course: Path, *args: str, timeout: float = 900, rule: bool = True) -> subprocess.CompletedProcess:
    """``python -m mha_grader grade <args>`` on ``course`` (its secret: course/../secret, made once);
    ``rule=False``: with the static rule off, to test the layers beneath it."""
    secret_file = course.parent / f"{course.name}.secret"
    if not secret_file.exists():
        secret_file.write_text("0123456789abcdef" * 4 + "\n")
        secret_file.chmod(0o600)
    program = ["-m", "mha_grader"] if rule else [str(WITHOUT_RULE)]
    return subprocess.run([sys.executable, *program, "--course", str(course), "grade", *args],
                          env=grader_env(secret_file), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def course_files(course: Path) -> dict[str, str]:
    """sha256 of every course file a student must not change (not the grader's own outputs)."""
    import hashlib
    outputs = {"autograded", "feedback", "gradebook.db", "class_report.html", ".grading.lock"}
    return {str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(course.rglob("*")) if p.is_file() and not p.is_symlink()
            and p.relative_to(course).parts[0] not in outputs and not p.name.endswith(".csv")}


class Batch:
    """One course folder after one run of the grader."""

    def __init__(self, course: Path):
        self.course = course
        self.run: subprocess.CompletedProcess | None = None

    def scores(self):
        return scores(self.course)

    def feedback(self, student: str, notebook: str) -> str | None:
        return feedback_text(self.course, student, notebook)

    def result(self, student: str, notebook: str) -> dict:
        return read(self.course / "autograded" / student / ASSIGNMENT / f"{notebook}.result.json")


_GRADED: dict = {}


def graded(base: Path) -> dict:
    """Grade both catalogues once per test session (memoised): {"catalogue", "hostile": Batch}.

    catalogue: the reference solution, an empty submission and every mutant;
    hostile: every hostile submission with two honest students around them.
    """
    if _GRADED:
        return _GRADED
    from .hostile import HOSTILE
    from .mutants import MUTANTS

    first = make_course(base / "catalogue")
    shutil.copytree(first, base / "hostile")
    catalogue, hostile = Batch(first), Batch(base / "hostile")
    submit(first, "s_solution", {n: filled(first, n) for n in NOTEBOOKS})
    submit(first, "s_empty", {n: filled(first, n, solve=False) for n in NOTEBOOKS})
    for m in MUTANTS:
        submit(first, m.student, {m.notebook: mutant_notebook(first, m)})
    for h in HOSTILE:
        h.submit(hostile.course)
    hostile.files_before = course_files(hostile.course)
    catalogue.run = grade(first, "--workers", "2")
    hostile.run = grade(hostile.course, "--workers", "2", "--test-seconds", "3", "--notebook-seconds", "8")
    _GRADED.update(catalogue=catalogue, hostile=hostile)
    return _GRADED
