"""The visible tests' message reaches the student whole through the real `nbgrader validate`
(it exits 0 even on failure: its text is read). Lines are wrapped so that nbgrader's 90-column
cut (Validator.width) loses nothing; a syntax error in the student's cell is reported as that."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from submissions import judged
from submissions.mutants import MUTANTS

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def validate(tmp_path: Path, notebook: str, answers: dict[str, str]) -> str:
    nb = json.loads((REPO / "exercises" / "mha" / f"{notebook}.ipynb").read_text())
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = answers.get(gid, judged.reference_answers(notebook)[gid])
    path = tmp_path / f"{notebook}.ipynb"
    path.write_text(json.dumps(nb))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([str(BIN / "nbgrader"), "validate", str(path)], cwd=tmp_path, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    return run.stdout


def errors(text: str) -> list[str]:
    """The text of each 'The error was:' block, lines joined."""
    out = []
    for block in text.split("The error was:")[1:]:
        lines = []
        for line in block.splitlines()[1:]:
            if line.startswith("====") or line.startswith("[ValidateApp"):
                break
            lines.append(line.strip())
        out.append(" ".join(" ".join(lines).split()))
    return out


def test_a_right_answer_validates(tmp_path):
    assert "Success! Your notebook passes all the tests." in validate(tmp_path, "02_split_heads", {})


@pytest.mark.parametrize("student", ["m06_split_no_transpose", "m18_scaled_by_d_model"])
def test_a_mutant_fails_validate_with_its_whole_message(tmp_path, student):
    mutant = next(m for m in MUTANTS if m.student == student)
    answer = mutant.answer(judged.reference_answers(mutant.notebook)[mutant.cell])
    text = validate(tmp_path, mutant.notebook, {mutant.cell: answer})
    assert "VALIDATION FAILED" in text
    found = errors(text)
    assert found and all(mutant.says in e for e in found), found
    message_lines = [line for block in text.split("The error was:")[1:] for line in block.split("=====")[0].splitlines()]
    assert message_lines and all(len(line) <= 4 + 78 for line in message_lines), text  # nbgrader indents by 4
    assert "Traceback" not in text and "mha_checks/" not in text


def test_a_syntax_error_is_reported_with_its_line(tmp_path):
    broken = ("def split_heads(x, num_heads):\n    batch, t, d = x.shape\n"
              "    x = x.reshape(batch, t, num_heads, d // num_heads\n    return x.transpose(0, 2, 1, 3)\n")
    found = errors(validate(tmp_path, "02_split_heads", {"split_heads": broken}))
    assert found and all("SyntaxError on line 3" in e and "NameError" not in e for e in found), found


def test_the_jupyterlab_validate_dialog_gets_the_wrapped_message(tmp_path):
    """The Validate button's server handler returns ``Validator().validate(path)``: its error texts."""
    from nbgrader.validator import Validator

    mutant = next(m for m in MUTANTS if m.student == "m06_split_no_transpose")
    answer = mutant.answer(judged.reference_answers(mutant.notebook)[mutant.cell])
    validate(tmp_path, mutant.notebook, {mutant.cell: answer})  # writes the notebook
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{BIN}{os.pathsep}{old}"
    try:
        result = Validator().validate(str(tmp_path / f"{mutant.notebook}.ipynb"))
    finally:
        os.environ["PATH"] = old
    texts = [cell["error"] for cell in result["failed"]]
    assert texts and all(mutant.says in " ".join(t.split()) for t in texts), texts
    assert all(len(line) <= 78 for t in texts for line in t.splitlines()), texts


def _validate_notebook(tmp_path: Path, name: str, nb: dict) -> str:
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps(nb))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(BIN / "nbgrader"), "validate", str(path)], cwd=tmp_path, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300).stdout


def test_validate_shows_the_graders_verdict_on_what_the_function_reaches(tmp_path):
    """Issue 25: the student sees the ready-made rule's verdict before handing in. Free cells (a plot, timing,
    a comparison with torch's own module) cost nothing; a helper that calls torch's attention refuses the
    tests that reach it, with the grader's words."""
    from submissions import corpora

    release = json.loads((REPO / "exercises" / "mha" / "05_assembly.ipynb").read_text())
    reference = judged.reference_answers("05_assembly")
    honest = corpora.Entry("honest", "05_assembly", "multi_head_attention", reference["multi_head_attention"],
                           (corpora.COMPARE, "import matplotlib.pyplot as plt\nimport time\nplt.plot([1, 2])\n"))
    assert "Success! Your notebook passes all the tests." in _validate_notebook(
        tmp_path, "05_assembly", corpora.notebook(release, honest, reference))
    helper = corpora.Entry("helper", "05_assembly", "multi_head_attention",
                           "def multi_head_attention(query, key, value, mha, causal=False):\n"
                           "    return helper(query, key, value, mha, causal)\n",
                           ("def helper(query, key, value, mha, causal):\n"
                            "    return F.scaled_dot_product_attention(query, key, value, is_causal=causal), None\n",))
    found = errors(_validate_notebook(tmp_path, "05_assembly", corpora.notebook(release, helper, reference)))
    assert len(found) == 5 and all("F.scaled_dot_product_attention` is torch's own attention" in e and
                                   "(reached by multi_head_attention → helper)" in e for e in found), found
