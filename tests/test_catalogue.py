"""The public catalogues at the judge level (no nbgrader): every right answer in every style gets
full marks, every wrong implementation loses exactly its cells and is named correctly (by a catalogued
switch that reproduces every call of a test it loses, or by what was seen: the ready-made rule, an argument
changed in place), no cell names a cause
that is not the mutant's, and the visible tests alone catch every mutant whose mistake small inputs can show.

Run with ``-s`` to read the counts.
"""
import pytest

from submissions import judged
from submissions.correct import CORRECT
from submissions.mutants import MUTANTS


def answer_of(m) -> str:
    return m.answer(judged.reference_answers(m.notebook)[m.cell])


@pytest.fixture(scope="module")
def graded():
    """{student: (hidden results, visible results)} for every mutant."""
    return {m.student: (judged.hidden_results(m.notebook, {m.cell: answer_of(m)}),
                        judged.visible_results(m.notebook, {m.cell: answer_of(m)})) for m in MUTANTS}


def test_catalogue_size_and_sources():
    assert len(MUTANTS) >= 60
    assert len({m.student for m in MUTANTS}) == len(MUTANTS)
    cited = [m for m in MUTANTS if m.source]
    assert len(cited) >= 8 and all(":" in m.source for m in cited)  # repository:path
    assert len(CORRECT) >= 25


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.student)
def test_mutant_loses_exactly_its_cells(mutant, graded):
    hidden, _ = graded[mutant.student]
    lost = {cell for cell, r in hidden.items() if not r.passed}
    assert lost == set(mutant.lost), {c: r.message for c, r in hidden.items() if not r.passed}


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.student)
def test_visible_tests(mutant, graded):
    """Every mutant fails the visible tests (``visible`` records it), with the same kind of message."""
    _, visible = graded[mutant.student]
    assert all(r.passed for r in visible.values()) is mutant.visible, visible


def test_counts(graded):
    named = [m for m in MUTANTS if any(mutant_says(m, r.message) for r in graded[m.student][0].values())]
    caught = [m for m in MUTANTS if any(not r.passed for r in graded[m.student][0].values())]
    seen = [m for m in MUTANTS if not all(r.passed for r in graded[m.student][1].values())]
    print(f"\nwrong implementations: {len(MUTANTS)}; caught by the hidden tests: {len(caught)}; "
          f"named correctly: {len(named)} ({100 * len(named) / len(MUTANTS):.0f}%); failing the visible tests: "
          f"{len(seen)}")
    unnamed = sorted(set(m.student for m in MUTANTS) - {m.student for m in named})
    print("not named:", unnamed)
    assert len(caught) == len(MUTANTS)
    crashed = [m.student for m in MUTANTS for r in (*graded[m.student][0].values(), *graded[m.student][1].values())
               if "could not be checked" in r.message]
    assert not crashed  # the judge itself never failed on an answer
    assert not unnamed


# mistakes seen, not inferred: the ready-made rule's verdict on the source, arguments whose memory changed, a
# keyword the error itself says the function does not take
SEEN = ("ready-made answer", "changes its arguments in place", "changes mha's parameters in place",
        "wrong keyword argument")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.student)
def test_each_mutant_is_named_by_a_reproduced_switch_and_nothing_else(mutant, graded):
    """Some cell names the mutant's mistake through a switch that reproduces it (``causes``: see
    tests/test_causes.py) or by what was seen (``SEEN``); every cause a cell names is one of the mutant's."""
    failed = [r for r in graded[mutant.student][0].values() if not r.passed]
    seen = [r for r in failed if r.mistake.split(": ", 1)[-1].startswith(SEEN)]
    assert any(mutant_says(mutant, r.message) for r in failed if r.causes or r in seen), [r.mistake for r in failed]
    assert all(mutant_says(mutant, r.message) for r in failed if r.causes), [r.message for r in failed if r.causes]


def mutant_says(m, message: str) -> bool:
    return any(phrase in message for phrase in (m.says, *m.also))


@pytest.mark.parametrize("variant", CORRECT, ids=lambda c: c.name)
def test_correct_variant_gets_full_marks(variant):
    hidden = judged.hidden_results(variant.notebook, {variant.cell: variant.code})
    visible = judged.visible_results(variant.notebook, {variant.cell: variant.code})
    failed = {c: r.message for c, r in (hidden | {f"visible {k}": v for k, v in visible.items()}).items()
              if not r.passed}
    assert not failed, failed


def test_correct_counts():
    credited = [c for c in CORRECT if all(r.passed for r in judged.hidden_results(c.notebook, {c.cell: c.code}).values())]
    print(f"\nright answers in other styles: {len(CORRECT)}; full marks: {len(credited)}")
    assert len(credited) == len(CORRECT)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_reference_passes_on_other_seeds(seed):
    for notebook in judged.reference_answers.__globals__["SOLUTIONS"].glob("*.ipynb"):
        results = judged.hidden_results(notebook.stem, {}, seed=seed)
        assert all(r.passed for r in results.values()), {c: r.message for c, r in results.items() if not r.passed}


@pytest.mark.parametrize("seed", [7, 31337])
def test_lost_cells_and_names_hold_for_other_secrets(seed):
    """The grader draws the hidden cases from the instructor's secret: any seed gives the same record."""
    wrong = []
    for m in MUTANTS:
        results = judged.hidden_results(m.notebook, {m.cell: answer_of(m)}, seed=seed)
        lost = {cell for cell, r in results.items() if not r.passed}
        if lost != set(m.lost) or not any(m.says in r.message for r in results.values()):
            wrong.append(m.student)
    for c in CORRECT:
        if not all(r.passed for r in judged.hidden_results(c.notebook, {c.cell: c.code}, seed=seed).values()):
            wrong.append(c.name)
    assert not wrong
