"""The grading command as an instructor runs it: secret, refusal without isolation, resume after
a kill, re-submission, regrading one student or one notebook, and the per-notebook JSON it keeps."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from submissions import kit
from submissions.mutants import MUTANTS

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")
WRONG_SPLIT = next(m for m in MUTANTS if m.student == "m06_split_no_transpose")
NUMPY_NOTEBOOKS = [n for n in kit.NOTEBOOKS  # 01-04 (10 points): the notebooks whose setup imports no torch
                   if "import torch" not in (kit.REPO / "solutions" / kit.ASSIGNMENT / f"{n}.ipynb").read_text()]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("grader") / "course")
    for i in range(6):
        kit.submit(course, f"s{i}", {n: kit.filled(course, n) for n in NUMPY_NOTEBOOKS})
    return course


def graded_keys(course: Path) -> dict:
    return {p.parent.parent.name: json.loads(p.read_text())
            for p in (course / "autograded").glob("*/mha/.graded.json")}


def totals(course: Path) -> dict:
    return {s: sum(v for nb in cells.values() for k, v in nb.items() if k != "needs_manual_grade")
            for s, cells in kit.scores(course).items()}


def test_no_secret_stops_with_how_to_make_one(course, tmp_path):
    env = {**kit.grader_env(tmp_path / "missing"), "MHA_GRADER_SECRET": str(tmp_path / "missing")}
    run = subprocess.run([sys.executable, "-m", "mha_grader", "--course", str(course), "grade"], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "No course secret" in run.stderr and "make secret" in run.stderr
    assert not (course / "autograded").exists()


def test_a_run_loads_nbgrader_only_to_open_the_gradebook_and_builds_no_uri_grammar(course, tmp_path):
    """What a run imports, read from Python's own account (-X importtime): a run that stops before grading (no
    secret) has loaded nothing of nbgrader, nbformat or jsonschema; a run that opens the gradebook loads nbgrader
    and jsonschema, but not rfc3987_syntax, whose 38 grammars (half of loading the grader) serve only jsonschema's
    "iri" formats, which nothing in a run checks."""
    def imported(secret_file: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
        run = subprocess.run([sys.executable, "-X", "importtime", "-m", "mha_grader", "--course", str(course), "grade",
                              "--student", "nobody"], env=kit.grader_env(secret_file), capture_output=True, text=True)
        return run, {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef" * 4 + "\n")
    secret.chmod(0o600)
    stopped, early = imported(tmp_path / "missing")
    assert stopped.returncode == 2 and "mha_grader.trusted.run" in early, stopped.stderr[-2000:]
    assert not [m for m in early if m.split(".")[0] in ("nbgrader", "nbformat", "jsonschema")]
    opened, whole = imported(secret)
    assert opened.returncode == 0 and {"nbgrader.api", "jsonschema"} <= whole, opened.stderr[-3000:]
    assert "lark" not in whole  # (the grammars' library: rfc3987_syntax is looked for, and refused, by jsonschema)


def test_secret_command_creates_a_private_file_once(tmp_path):
    env = {**kit.grader_env(tmp_path / "s"), "MHA_GRADER_SECRET": str(tmp_path / "s")}
    cmd = [sys.executable, "-m", "mha_grader", "secret"]
    assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o600
    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert again.returncode == 1 and "exists" in again.stderr


def test_refuses_to_grade_where_isolation_fails(course, monkeypatch, capsys):
    from mha_grader.trusted import cli
    from mha_grader.walls import probing
    monkeypatch.setenv("MHA_GRADER_SECRET", str(course.parent / "course.secret"))
    (course.parent / "course.secret").write_text("f" * 64)
    monkeypatch.setattr(probing, "probe", lambda *a, **k: ["cannot read /course/solutions: failed (it worked)"])
    assert cli.main(["--course", str(course), "grade"]) == 3
    err = capsys.readouterr().err
    assert "Refusing to grade" in err and "cannot read /course/solutions" in err and "--unsafe-no-sandbox" in err


def test_without_workers_given_one_sandbox_more_than_the_cores_runs_and_a_local_cluster_has_one_per_core(monkeypatch):
    from mha_grader.trusted import cli
    seen = []
    monkeypatch.setattr(cli, "_grade", lambda args, command: seen.append((args.scheduler, args.workers)) or 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    for typed in ([], ["--scheduler", "local"], ["--workers", "1"], ["--scheduler", "local", "--workers", "5"]):
        assert cli.main(["grade", *typed]) == 0
    assert seen == [("", 4), ("local", 3), ("", 1), ("local", 5)]


def test_a_killed_run_keeps_its_grades_and_the_next_run_finishes_the_rest(course):
    kit.grade(course, "--student", "nobody")  # makes the course's secret file
    proc = subprocess.Popen([sys.executable, "-m", "mha_grader", "--course", str(course), "grade", "--workers", "1"],
                            env=kit.grader_env(course.parent / "course.secret"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while sum(len(v) for v in graded_keys(course).values()) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = graded_keys(course)
    done = sum(len(v) for v in before.values())
    jobs = 6 * len(kit.NOTEBOOKS)  # 05-07 were not handed in: graded (0, "not handed in") too
    assert 5 <= done < jobs, "kill it half-way"
    recorded = kit.scores(course)
    for student, notebooks in before.items():  # every stamped notebook has its grades committed
        assert all(v is not None for nb in notebooks for v in recorded[student][nb].values())
    rerun = kit.grade(course, "--workers", "2")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"This run graded {jobs - done} notebook(s)" in rerun.stdout
    assert totals(course) == {f"s{i}": 10.0 for i in range(6)}
    again = kit.grade(course)
    assert "This run graded 0 notebook(s)" in again.stdout


def test_a_resubmitted_notebook_is_graded_again_without_a_flag(course):
    kit.grade(course)
    kit.submit(course, "s0", {"02_split_heads": kit.filled(
        course, "02_split_heads", {"split_heads": WRONG_SPLIT.answer(kit.solution_cells("02_split_heads")["split_heads"])})})
    run = kit.grade(course)
    assert "This run graded 1 notebook(s)" in run.stdout
    assert kit.scores(course)["s0"]["02_split_heads"]["test_split_heads_values"] == 0
    kit.submit(course, "s0", {"02_split_heads": kit.filled(course, "02_split_heads")})  # fixed again
    assert "This run graded 1 notebook(s)" in kit.grade(course).stdout
    assert kit.scores(course)["s0"]["02_split_heads"]["test_split_heads_values"] == 1


def test_regrading_one_student_or_one_notebook_is_one_command(course):
    run = kit.grade(course, "--student", "s3", "--notebook", "03_merge_heads", "--force")
    assert "This run graded 1 notebook(s)" in run.stdout
    run = kit.grade(course, "--student", "s4", "--force")
    assert f"This run graded {len(kit.NOTEBOOKS)} notebook(s)" in run.stdout


MALFORMED = {
    "cells is not a list": lambda nb: nb.update(cells={"a": 1}),
    "a cell is a string": lambda nb: nb["cells"].insert(0, "not a cell"),
    "source is a number": lambda nb: nb["cells"][3].update(source=12),
    "source list holds numbers": lambda nb: nb["cells"][3].update(source=[1, None, "x"]),
    "metadata is a list": lambda nb: [c.update(metadata=[1, 2]) for c in nb["cells"]],
    "grade id is not a string": lambda nb: [c["metadata"].get("nbgrader", {}).update(grade_id=7) for c in nb["cells"]],
    "nbgrader metadata is a string": lambda nb: [c["metadata"].update(nbgrader="x") for c in nb["cells"]],
    "cell type unknown": lambda nb: [c.update(cell_type="raw") for c in nb["cells"]],
    "deeply nested output": lambda nb: nb["cells"][0].update(outputs=[[[[[[[]]]]]]] * 3),
    "null bytes in source": lambda nb: [c.update(source="\x00\x00 def x(:") for c in nb["cells"]],
}


@pytest.mark.parametrize("how", MALFORMED)
def test_a_malformed_notebook_gets_a_grade_and_a_reason_never_an_exception(how, course):
    from mha_checks.hidden import hidden_cases
    from mha_grader.trusted import judging, notebooks, secret
    release = notebooks.load_release(course / "exercises" / "mha")["01_project"]
    nb = kit.filled(course, "01_project")
    MALFORMED[how](nb)
    raw = course.parent / f"malformed-{abs(hash(how))}.ipynb"
    raw.write_text(json.dumps(nb))
    parsed, _, reason = notebooks.read_submission(raw)
    cases = {g.id: hidden_cases(g.id, secret.rng(b"k" * 40, "mha", release.name, g.id)) for g in release.grade_cells}
    result = judging.grade_notebook(release, parsed, reason, cases)
    assert [t["id"] for t in result["tests"]] == [g.id for g in release.grade_cells]
    assert all(t["score"] in (0.0, t["points"]) for t in result["tests"])
    assert all(t["message"] for t in result["tests"] if t["score"] == 0)


def test_results_too_large_to_read_are_named_as_such(course, monkeypatch):
    from mha_checks.hidden import hidden_cases
    from mha_grader.trusted import judging, notebooks, secret
    from mha_grader.walls import sandbox
    release = notebooks.load_release(course / "exercises" / "mha")["01_project"]
    cases = {g.id: hidden_cases(g.id, secret.rng(b"k" * 40, "mha", release.name, g.id)) for g in release.grade_cells}
    monkeypatch.setattr(sandbox, "MAX_REPORT", 2000)  # the right answer's first results fill it
    result = judging.grade_notebook(release, kit.filled(course, "01_project"), "", cases)
    unread = [t for t in result["tests"] if t["score"] == 0]
    assert unread, result
    assert all("more data than the grader reads" in t["message"] for t in unread), unread
