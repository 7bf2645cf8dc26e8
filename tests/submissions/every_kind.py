"""A class holding every kind of answer the test corpora hold, for the proof that a grade is the student's
code's alone, whatever the machine does (tests/test_fair_time.py: a small class; bench/bench_fair_time.py:
100 students and more, every hostile, untrusted and waiting submission among them).

The catalogues: right answers, the mutants (a classic mistake each), the hostile and untrusted submissions,
the answers whose time is the question (waiting.py: sleeps, blocking reads, a process stopping itself,
endless loops), the honest corpus in many styles (torch imported in a NumPy exercise among them) and the
ready-made routes. The class is graded with the static rule off (the rule admits no code that sleeps, and
the time limits beneath it must hold), so every line of every answer runs; the ready-made routes that
corrupt memory on purpose (to show that the rule refuses them) are left out: run, they would crash at a
place that varies from run to run.
"""
from itertools import zip_longest
from pathlib import Path

from . import corpora, judged, kit
from .hostile import HOSTILE
from .mutants import MUTANTS
from .untrusted import UNTRUSTED
from .waiting import WAITING

UNSAFE_ROUTES = {"r22_as_strided_and_id", "r39_cython_class_method_on_another_object",
                 "r53_storage_read_through_a_tensor_subclass", "r54_ndarray_resize_under_a_view",
                 "r55_sparse_indices_written_in_place", "r56_sparse_tensor_from_raw_indices",
                 "r57_legacy_generator_state_past_its_key"}
SMALL = {  # one or two of each kind, for a test that runs in CI
    "mutants": ("m06_split_no_transpose", "m21_mask_after_softmax"),
    "hostile": ("h05_endless_cell", "h06_slow_just_under_the_limit", "h07_memory_in_one_test", "h08_invalid_json",
                "h09_huge_output", "h16_calls_the_module"),
    "untrusted": ("u01_forged_records", "u04_kills_the_harness"),
    "waiting": tuple(w.student for w in WAITING),
    "corpus": ("h32_project_torch_from_numpy", "h34_split_nanogpt_view_transpose", "r01_sdpa"),
}


OUTPUTS = ("feedback", "autograded", "grades_by_student.csv", "mistakes.csv", "tests.csv", "notes.csv",
           "class_report.html")  # what a grading run writes for the students and the instructor


def outputs(course: Path) -> dict[str, bytes]:
    """Every file of OUTPUTS, by its path in the course (the stored results and stamps, which hold timings and
    file statuses, aside)."""
    found = {}
    for name in OUTPUTS:
        path = course / name
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and not file.name.endswith(".result.json") and file.name != ".graded.json":
                found[str(file.relative_to(course))] = file.read_bytes()
    return found


def differences(a: dict, b: dict) -> list[str]:
    """The files that differ between two outputs(), or are in one only."""
    return sorted(name for name in set(a) | set(b) if a.get(name) != b.get(name))


def small(course) -> list[str]:
    """One right student, and one student per answer of SMALL handing in only the notebooks it changes."""
    students = ["s00_correct"]
    kit.submit(course, "s00_correct", {n: kit.filled(course, n) for n in kit.NOTEBOOKS})
    for case in [c for c in HOSTILE + UNTRUSTED + WAITING if c.student in SMALL["hostile"] + SMALL["untrusted"]
                 + SMALL["waiting"]]:
        case.submit(course)
        students.append(case.student)
    for name, (notebook, content) in _one_notebook_answers(course, SMALL["mutants"] + SMALL["corpus"]).items():
        kit.submit(course, name, {notebook: content})
        students.append(name)
    return students


def large(course, students: int = 100) -> list[str]:
    """``students`` students (more if the catalogues below need more) handing in every notebook of the assignment:
    one per hostile, untrusted and waiting submission (right answers in the notebooks it leaves alone, but where its
    extra files take their place), then students whose notebooks each hold a one-notebook answer, the
    mutants', the honest corpus's and the ready-made routes' dealt in turn, each notebook's in the catalogues'
    order, until ``students`` are made (right answers where a notebook's answers run out)."""
    names = []
    for case in HOSTILE + UNTRUSTED + WAITING:
        made = case.build(course)
        right = {} if case.extra else {n: kit.filled(course, n) for n in kit.NOTEBOOKS if n not in made}  # (its extra
        kit.submit(course, case.student, {**right, **made})  # files may take a notebook's place: a link, a folder)
        if case.extra:
            case.extra(course, course / "submitted" / case.student / kit.ASSIGNMENT)
        names.append(case.student)
    kinds = [[m.student for m in MUTANTS], [e.name for e in corpora.HONEST],
             [e.name for e in corpora.READY_MADE if e.name not in UNSAFE_ROUTES]]
    answers = _one_notebook_answers(course, [name for kind in kinds for name in kind])
    queues = {n: [answers[name][1] for group in zip_longest(*kinds) for name in group
                  if name and answers[name][0] == n] for n in kit.NOTEBOOKS}
    for i in range(max(0, students - len(names))):
        name = f"s{i:03d}_mixed"
        kit.submit(course, name, {n: queues[n].pop(0) if queues[n] else kit.filled(course, n) for n in kit.NOTEBOOKS})
        names.append(name)
    return names


def _one_notebook_answers(course, wanted) -> dict[str, tuple[str, dict]]:
    """{entry name: (its notebook, the notebook)} of the mutants and corpus entries named in ``wanted``."""
    found = {}
    raw = {n: kit.release(course, n) for n in kit.NOTEBOOKS}
    for m in MUTANTS:
        if m.student in wanted:
            found[m.student] = (m.notebook, kit.mutant_notebook(course, m))
    for e in corpora.HONEST + corpora.READY_MADE:
        if e.name in wanted:
            found[e.name] = (e.notebook, corpora.notebook(raw[e.notebook], e, judged.reference_answers(e.notebook)))
    return found
