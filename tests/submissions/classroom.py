"""A generated class: every student hands in the notebooks, most of them right, one of them a
classic mistake (a mutant) or a hostile trick. Used by the class-grading test and the benchmark."""
from itertools import zip_longest
from pathlib import Path

from . import kit
from .hostile import HOSTILE
from .mutants import MUTANTS

# Hostile submissions that end quickly (the endless loops and the 100 MB print cost their time
# limits, whatever the grader: they are covered by the hostile catalogue's own tests).
QUICK_HOSTILE = ["h08_invalid_json", "h10_patched_numpy", "h03_stripped_all_metadata", "h01_edited_locked_cells",
                 "h02_deleted_test_cells", "h04_schema_and_extra_grade_cells", "h11_imports_the_checks",
                 "h12_reads_course_files", "h13_writes_the_gradebook", "h14_private_torch_kernel",
                 "h15_obfuscated_kernel", "h16_calls_the_module"]
BY_NAME = {h.student: h for h in HOSTILE}


def recipes(notebooks: list[str]) -> list[tuple[str, object]]:
    """The kinds of student, in the order they are dealt: correct, then mutants and hostile ones mixed."""
    by_notebook = [[m for m in MUTANTS if m.notebook == n] for n in notebooks]
    mutants = [("mutant", m) for round_ in zip_longest(*by_notebook) for m in round_ if m]  # notebooks in turn
    hostile = [("hostile", h) for h in QUICK_HOSTILE]
    mixed = [x for pair in zip(mutants, hostile + [None] * len(mutants)) for x in pair if x]
    return [("correct", None), *mixed, *hostile[len(mutants):]]


def student_files(course: Path, kind: str, recipe, notebooks: list[str], complete: bool = True) -> dict:
    """{notebook: content}: the right answer everywhere (or, unless ``complete``, only in the notebooks the
    recipe does not touch), except what the recipe changes."""
    files = {n: kit.filled(course, n) for n in notebooks if complete or kind == "correct"}
    if kind == "mutant":
        files[recipe.notebook] = kit.mutant_notebook(course, recipe)
    elif kind == "hostile":
        files.update(BY_NAME[recipe].build(course))
    return {n: c for n, c in files.items() if n in notebooks}


def generate(course: Path, students: int, notebooks: list[str] | None = None,
             complete: bool = True) -> dict[str, dict]:
    """Write ``students`` submissions into course/submitted/; returns {student: {notebook: content}}.
    ``complete=False``: a mutant or hostile student hands in only the notebook(s) of its recipe."""
    notebooks = notebooks or kit.NOTEBOOKS
    kinds = recipes(notebooks)
    made = {}
    for i in range(students):
        kind, recipe = kinds[i % len(kinds)]
        label = recipe.student if kind == "mutant" else recipe if kind == "hostile" else "correct"
        student = f"s{i:03d}_{label}"[:60]
        made[student] = student_files(course, kind, recipe, notebooks, complete)
        kit.submit(course, student, made[student])
    return made
