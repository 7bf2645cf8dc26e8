"""The ready-made rule is fair and sound on corpora of our own (tests/submissions/corpora.py): every honest
implementation (real-world styles: nanoGPT, d2l, the Annotated Transformer, Karpathy's lecture code,
einsum, loops, classes, NumPy...) is admitted and earns full marks, its free cells (plots, timing, magics,
a comparison with torch's own module) neither run nor cost anything; every ready-made route scores 0 and
its feedback says why. First at the rule (fast, anywhere), then end to end with the course's own grader
(sandbox, gradebook, feedback), as `make grade` runs it."""
import json
import os

import numpy as np
import pytest

from mha_checks import admission, calling, hidden
from mha_checks.judge import judge
from mha_grader.trusted import notebooks
from submissions import corpora, judged, kit

FOLDER = judged.REPO / "exercises" / "mha"
RELEASES = notebooks.load_release(FOLDER)
RAW = {name: json.loads((FOLDER / f"{name}.ipynb").read_text()) for name in RELEASES}
FREE_CODE = ("plt.", "MultiheadAttention", "scaled_dot_product_attention", "perf_counter", "%timeit", "reference")


def _notebook(entry: corpora.Entry) -> dict:
    return corpora.notebook(RAW[entry.notebook], entry, judged.reference_answers(entry.notebook))


def _ruling(entry: corpora.Entry, seed: int = 0):
    release = RELEASES[entry.notebook]
    rng = np.random.default_rng(seed)
    cases = {g.id: hidden.hidden_cases(g.id, rng) for g in release.grade_cells}
    prog = notebooks.program(release, _notebook(entry))
    calls = {g: {c.function for c in cs} for g, cs in cases.items()}
    return admission.admit(prog.cells, calls, trusted=len(release.setup)), cases


def test_the_corpora_are_large_and_cover_every_notebook():
    assert len(corpora.HONEST) >= 40 and len(corpora.READY_MADE) >= 40
    assert {e.notebook for e in corpora.HONEST} == set(RELEASES)
    assert len({e.name for e in corpora.HONEST + corpora.READY_MADE}) == len(corpora.HONEST + corpora.READY_MADE)


@pytest.mark.parametrize("entry", corpora.HONEST, ids=lambda e: e.name)
def test_an_honest_implementation_is_admitted_and_its_free_cells_never_run(entry):
    ruling, cases = _ruling(entry)
    assert ruling.refused == {}, {t: [str(r) for r in found] for t, found in ruling.refused.items()}
    ran = "".join(c["source"] for c in ruling.cells if c["label"] != entry.cell)
    assert not [w for w in FREE_CODE if w in ran], ran
    namespace = judged.run_cells(ruling.cells)  # what the sandbox would run, here, judged as the grader judges
    for gid, drawn in cases.items():
        for case in drawn:
            verdict = judge(case, calling.call(namespace[case.function], list(case.names), case.specs()))
            assert verdict.passed, (gid, verdict.message)


@pytest.mark.parametrize("entry", corpora.READY_MADE, ids=lambda e: e.name)
def test_a_ready_made_route_is_refused_with_its_true_reason(entry):
    ruling, _ = _ruling(entry)
    assert set(ruling.refused) == {g.id for g in RELEASES[entry.notebook].grade_cells}
    for found in ruling.refused.values():
        assert entry.says in admission.explain(found, most=20), admission.explain(found, most=20)
    assert not [c for c in ruling.cells if c["label"] == entry.cell]  # nothing of it runs


# --- end to end: the course's grader, its sandbox, its gradebook and feedback -----------------------------

pytestmark_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("corpora") / "course")
    for entry in corpora.HONEST + corpora.READY_MADE:
        kit.submit(course, entry.name, {entry.notebook: _notebook(entry)})
    run = kit.grade(course, "--workers", "2", timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    return course


@pytestmark_root
def test_every_honest_notebook_earns_full_marks_end_to_end(course):
    scores, full = kit.scores(course), kit.max_scores(course)
    lost = {e.name: {c: s for c, s in scores[e.name][e.notebook].items() if c != "needs_manual_grade"
                     and s != full[e.notebook][c]} for e in corpora.HONEST}
    assert not {k: v for k, v in lost.items() if v}, lost


@pytestmark_root
def test_every_ready_made_route_scores_0_end_to_end_and_its_feedback_says_why(course):
    scores = kit.scores(course)
    earned = {e.name: sum(s for c, s in scores[e.name][e.notebook].items() if c != "needs_manual_grade")
              for e in corpora.READY_MADE}
    assert not {k: v for k, v in earned.items() if v}, earned
    silent = [e.name for e in corpora.READY_MADE if e.says not in " ".join(
        (kit.feedback_text(course, e.name, e.notebook) or "").split())]
    assert not silent
