"""What a job sends back, and what a submission makes the grader do, are untrusted.

The catalogue of tests/submissions/untrusted.py is graded in one batch, with the static rule off
and honest students around it, then exported by nbgrader: each attacker gets its exact score,
the honest students full marks, the export is written, and nothing of the hidden inputs reaches a
file a student receives. Beneath that: the schema of records (frames.py), the bounds on reading
a notebook (notebooks.py), and the sandbox holding only the inputs of the call being made.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mha_checks import calling
from mha_grader.trusted import frames, notebooks
from mha_grader.walls import sandbox
from submissions import kit
from submissions.hostile import FULL
from submissions.untrusted import UNTRUSTED

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")
WITHOUT_RULE = kit.REPO / "tests" / "submissions" / "without_static_rule.py"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("untrusted") / "course")
    for case in UNTRUSTED:
        case.submit(course)
    secret = course.parent / "course.secret"
    secret.write_text("0123456789abcdef" * 4 + "\n")
    secret.chmod(0o600)
    run = subprocess.run([sys.executable, str(WITHOUT_RULE), "--course", str(course), "grade", "--workers", "2",
                          "--test-seconds", "3", "--notebook-seconds", "8"], env=kit.grader_env(secret),
                         capture_output=True, text=True, timeout=900)
    export = kit.nbgrader(course, "export")
    return argparse.Namespace(course=course, run=run, export=export, secret=secret)


@needs_root
def test_the_run_ends_and_the_export_is_written(batch):
    assert batch.run.returncode == 0, batch.run.stderr[-3000:]
    assert batch.export.returncode == 0, batch.export.stdout[-2000:]
    rows = (batch.course / "grades.csv").read_text().splitlines()
    assert {line.split(",")[3] for line in rows[1:]} >= {c.student for c in UNTRUSTED}, rows[:3]


@pytest.fixture(scope="module")
def scores(batch):
    return kit.scores(batch.course)


@needs_root
@pytest.mark.parametrize("case", UNTRUSTED, ids=lambda c: c.student)
def test_exact_score(case, scores):
    scores = scores[case.student]
    got = {nb: sum(v for k, v in cells.items() if k != "needs_manual_grade") for nb, cells in scores.items()}
    assert got == {nb: case.points.get(nb, 0) for nb in FULL}


@needs_root
@pytest.mark.parametrize("case", [c for c in UNTRUSTED if c.says], ids=lambda c: c.student)
def test_feedback_says_what_happened(case, batch):
    for notebook, phrase in case.says.items():
        text = kit.feedback_text(batch.course, case.student, notebook)
        assert text is not None and phrase in text, f"{case.student}/{notebook}: {phrase!r} missing"


@needs_root
def test_nothing_of_the_hidden_inputs_reaches_a_student(batch):
    """Every element of every hidden input (as Python writes a float) is looked for in every file of
    every student's feedback folder, and in the notebooks formgrader shows them."""
    from mha_grader.trusted import course as course_mod, jobs, secret
    os.environ["MHA_GRADER_SECRET"] = str(batch.secret)
    course = course_mod.Course(batch.course)
    args = argparse.Namespace(student=[], notebook=[], force=True)
    plan, _ = jobs.plan(course, secret.load(), args)
    make = jobs.Maker(course, secret.load(), force=True)
    numbers: dict[str, set] = {}
    for job in map(make, plan):  # (the files are those graded: the same bytes, the same draw)
        for cases in jobs.draw(job["seeds"]).values():
            for case in cases:
                for spec in case.specs():
                    numbers.setdefault(job["student"], set()).update(_floats(spec))
    for student, wanted in numbers.items():
        files = [*(batch.course / "feedback" / student).rglob("*"), *(batch.course / "autograded" / student).rglob("*")]
        text = "".join(p.read_text(errors="replace") for p in files if p.is_file())
        assert "$array" not in text and '"specs"' not in text, student
        leaked = wanted & set(re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text))
        assert not leaked, (student, sorted(leaked)[:5])


def _floats(spec) -> set[str]:
    """The hidden values of a case's argument as repr writes them (long enough not to occur by chance)."""
    if isinstance(spec, list):
        return set().union(*(_floats(s) for s in spec)) if spec else set()
    if isinstance(spec, dict) and "$array" in spec:
        return {repr(float(v)) for v in calling.decode_array(spec["$array"]).ravel()
                if len(repr(float(v))) >= 12}
    if isinstance(spec, dict):
        return set().union(*(_floats(v) for v in spec.values())) if spec else set()
    return set()


@needs_root
def test_what_students_send_back_is_capped_and_printable(batch):
    out = batch.run.stdout + batch.run.stderr
    assert not CONTROL.search(out), CONTROL.findall(out)[:5]
    assert len(out) < 100_000
    for table in ("mistakes.csv", "grades_by_student.csv", "tests.csv"):
        text = (batch.course / table).read_text()
        assert len(text) < 50_000 and not CONTROL.search(text.replace("\r\n", "\n")), table
    for page in (batch.course / "feedback").rglob("*.html"):
        assert page.stat().st_size < 200_000, page
    names = kit.feedback_text(batch.course, "u09_huge_class_names", "03_merge_heads")
    assert "Q" * 50 in names and "Q" * 200 not in names


@needs_root
def test_what_a_student_handed_in_besides_the_notebooks_is_one_counted_line(batch):
    lines = [line for line in batch.run.stdout.splitlines() if "u13_honest_with_clutter" in line and "note" in line]
    assert len(lines) == 1, lines
    assert len(lines[0]) < 400
    notes = [row["note"] for row in csv.DictReader((batch.course / "notes.csv").open(encoding="utf-8"))]
    said = "43 item(s) handed in besides the notebooks were not read (1 link, 1 folder, 41 other files)"
    assert [n for n in notes if "u13_honest_with_clutter" in n and said in n], notes


# --- the sandbox holds only the inputs of the call being made ------------------------------------

MARK = 1234567.890625
SCRAMBLE = 0x9E3779B97F4A7C15  # odd: x -> x * SCRAMBLE (mod 2**64) is one to one


@needs_root
def test_the_sandbox_holds_only_the_inputs_of_the_call_being_made():
    """Case 0 looks for an input that only the last case has: in the job folder and /tmp (its bytes,
    as base64 and as JSON would hold them) and in its own memory; the last case finds it in its own
    memory (the search works). The search holds only backwards or scrambled forms of what it looks
    for, so that it never finds itself."""
    bits = int(np.float64(MARK).view(np.uint64))
    marked = calling.encode_array(np.full((2, 3), MARK))
    search = textwrap.dedent("""
        import os, numpy as np
        NEEDLES = [n[::-1] for n in (%r, %r)]  # written backwards: the job holds this source
        WANT, SCRAMBLE = np.uint64(%d), np.uint64(%d)
        def probe(x):
            found = []
            for folder in ("/job", "/tmp"):
                for name in os.listdir(folder):
                    path = os.path.join(folder, name)
                    if os.path.isfile(path) and any(n in open(path, errors="replace").read() for n in NEEDLES):
                        found.append(path)
            with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
                for line in maps:
                    span, rights = line.split()[:2]
                    start, end = (int(n, 16) for n in span.split("-"))
                    if "r" not in rights:
                        continue
                    try:
                        mem.seek(start)
                        chunk = mem.read(end - start)
                    except (OSError, OverflowError, ValueError):
                        continue
                    words = np.frombuffer(chunk, np.uint64, len(chunk) // 8)
                    if np.any(words * SCRAMBLE == WANT):
                        found.append("memory")
            return sorted(set(found))
    """ % (marked["$array"]["data"][:40][::-1], repr(MARK)[::-1], (bits * SCRAMBLE) % 2 ** 64, SCRAMBLE))
    plain = calling.encode_array(np.zeros((2, 3)))
    job = {"torch": False, "cells": [{"label": "c0", "source": search}],
           "tests": [{"id": "t0", "cases": [{"function": "probe", "names": ["x"], "specs": [plain]}] * 2},
                     {"id": "t1", "cases": [{"function": "probe", "names": ["x"], "specs": [plain]},
                                            {"function": "probe", "names": ["x"], "specs": [marked]}]}]}
    with np.errstate(over="ignore"):
        report = sandbox.run(job, sandbox.Limits(test_s=20, notebook_s=40))
    found = {(r["test"], r["case"]): calling.decode(r["outcome"]["result"]) for r in report.records if "outcome" in r}
    assert found[("t0", 0)] == found[("t0", 1)] == found[("t1", 0)] == [], found
    assert found[("t1", 1)] == ["memory"], found


# --- the records' schema ---------------------------------------------------------------------------

JOB = {"tests": [{"id": "t", "cases": [{"function": "f", "names": ["x"]}]}]}
SPENT = dict.fromkeys(frames.TIMES, 0.0)  # the seconds a status record says were spent


def test_text_is_made_valid_and_capped():
    assert frames.text("a\udcff\x1b[2J\x00b\n\tc", 100) == "a\ufffd\ufffd[2J\ufffdb\n\tc"
    assert len(frames.text("Q" * 2_000_000, 100)) == 100
    json.dumps(frames.text("\udcff" * 10, 5)).encode()  # no UnicodeEncodeError downstream


@pytest.mark.parametrize("records", [
    [{"test": "t", "status": ["exit"], "detail": 1, "time": SPENT}],
    [{"test": "t", "status": "exit", "detail": [1, 2], "time": SPENT}],
    [{"test": "t", "status": "timeout", "detail": 10}],
    [{"test": "t", "status": "timeout", "detail": 10, "time": {**SPENT, "cpu": float("nan")}}],
    [{"test": "t", "status": "timeout", "detail": 10, "time": {**SPENT, "cpu": "10"}}],
    [{"test": "t", "status": "timeout", "detail": 10, "time": {"cpu": 10.0}}],
    [{"test": ["t"], "cells": []}],
    [{"test": "t", "cells": [{"label": "c", "type": ["T"], "message": "m", "line": 1}]}],
    [{"test": "t", "cells": [{"label": "c", "type": "T", "message": "m", "line": "one"}]}],
    [{"test": "t", "case": 0, "outcome": {"result": 1.0}}, {"test": "t", "case": 0, "outcome": {"result": 1.0}}],
    [{"test": "t", "case": 1, "outcome": {"result": 1.0}}],
    [{"test": "t", "case": 0, "outcome": {"result": 1.0, "mutated": ["y"]}}],
    [{"test": "t", "case": 0, "outcome": {"result": 1, "ready_made": False}}],
    [{"test": "t", "secret": 1}],
    [{"test": "t", "status": "done", "detail": 0, "time": SPENT}] * 50,
], ids=lambda r: json.dumps(r)[:60])
def test_a_record_outside_the_schema_is_refused_with_a_sentence(records):
    with pytest.raises(frames.Invalid) as refused:
        frames.events(records, JOB)
    assert str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("outcome", [
    {"result": {"$array": {"dtype": "float64", "shape": [10 ** 9], "data": ""}}},
    {"result": {"$array": {"dtype": "float64", "shape": [2], "data": "AAAA"}}},
    {"result": {"$code": "os.system('x')"}},
    {"result": [[[[[[[[1]]]]]]]]},
    {"result": [0.0] * 100},
    {"result": 2 ** 63},
    {"result": [1, -2 ** 70]},
    {"error": {"type": "T", "message": "m"}},
    {"error": {"type": ["T"], "message": [1], "line": "x"}},
], ids=lambda o: json.dumps(o)[:60])
def test_a_value_outside_the_schema_costs_its_call_alone(outcome):
    """What a call gave back is the student's process's word: outside the schema, it is read as a value the
    grader cannot read (that call's test fails with those words); the notebook's other records stand."""
    got = frames.events([{"test": "t", "case": 0, "outcome": {**outcome, "mutated": ["x"]}},
                         {"test": "t", "status": "done", "detail": 0, "time": SPENT}], JOB)["t"]
    assert got["cases"][0]["mutated"] == ["x"] and got["status"] == ("done", 0)
    assert got["cases"][0]["result"]["$other"].startswith("value the grader cannot read: "), got


class _Lying(list):
    def __len__(self):
        return 1


class _Huge(int):
    def __int__(self):
        return 3


def test_a_returned_value_is_encoded_as_it_is_not_as_it_says():
    """A list's items and an integer's value are read from the objects themselves (a subclass's len() or
    int() is the student's code): 100 items are more than a frame holds, 2**70 more than 64 bits."""
    assert calling.encode(_Lying([0.0] * 100)) == {"$other": "a _Lying of more than 64 items"}
    assert calling.encode(_Lying([1.0, 2.0])) == [1.0, 2.0]
    assert calling.encode(_Huge(2 ** 70)) == {"$other": "an integer beyond 64 bits"}
    assert calling.encode(_Huge(5)) == 5 and calling.encode(-2 ** 63 + 1) == -2 ** 63 + 1
    for value in (_Lying([0.0] * 100), _Huge(2 ** 70), (1,) * 65):
        got = frames.events([{"test": "t", "case": 0, "outcome": {"result": calling.encode(value)}}], JOB)["t"]
        assert "$other" in got["cases"][0]["result"], got


def test_records_inside_the_schema_come_back_capped():
    array = calling.encode(np.arange(6.0).reshape(2, 3))
    got = frames.events([{"harness": "started"},
                         {"test": "t", "cells": [{"label": "c" * 500, "type": "E" * 2_000_000, "message": "\udcff",
                                                  "line": None}]},
                         {"test": "t", "case": 0, "outcome": {"result": {"$tuple": [array, {"$other": "Q" * 10 ** 6}]},
                                                              "mutated": ["x"]}},
                         {"test": "t", "status": "done", "detail": 0, "time": {**SPENT, "cpu": 1}}], JOB)["t"]
    cell = got["cells"][0]
    assert len(cell["label"]) == 100 and len(cell["type"]) == 100 and cell["message"] == "\ufffd"
    assert got["cases"][0]["mutated"] == ["x"] and len(got["cases"][0]["result"]["$tuple"][1]["$other"]) == 100
    np.testing.assert_array_equal(calling.decode(got["cases"][0]["result"])[0], np.arange(6.0).reshape(2, 3))
    assert got["status"] == ("done", 0) and got["time"] == {**SPENT, "cpu": 1.0}


# --- bounded reading of a notebook -------------------------------------------------------------------

def _notebook(tmp_path, cells, name="nb.ipynb"):
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return notebooks.read_submission(path)


def _code(source):
    return {"cell_type": "code", "source": source, "metadata": {}, "outputs": []}


@pytest.mark.parametrize("cells, reason", [
    ([_code("x = " + "-" * 30_000 + "1")], "nested too deeply"),
    ([_code("x = " + "(" * 90 + "1" + ")" * 90 + " + " + "[" * 120 + "]" * 120)], "levels deep"),
    ([_code("x=1\n" * 17_000)], "syntax nodes"),
    ([_code("# " + "x" * 200_000)], "characters"),
    ([_code("x = 1")] * 1_001, "cells"),
    ([{"cell_type": "markdown", "source": "", "metadata": {}, "attachments": [[]] * 600_000}], "JSON values"),
], ids=["parser-recursion", "depth", "nodes", "cell-size", "cells", "values"])
def test_a_notebook_past_a_bound_is_not_read_and_says_which(tmp_path, cells, reason):
    nb, digest, why = _notebook(tmp_path, cells)
    assert nb is None and digest and reason in why, why


def test_a_cell_read_before_still_counts_against_each_notebooks_bound(tmp_path):
    """What reading a cell found is remembered across notebooks (notebooks._Memo); the bound is the
    notebook's: a cell within it alone, then repeated past it."""
    cell = _code("x=1\n" * 2_400)  # (9,601 syntax nodes)
    assert len(cell["source"]) <= notebooks.MEMO_CHARS  # (remembered)
    assert _notebook(tmp_path, [cell], "one.ipynb")[0] is not None
    nb, _, why = _notebook(tmp_path, [cell] * 6, "six.ipynb")
    assert nb is None and f"past {notebooks.MAX_AST_NODES} syntax nodes" in why, why


def test_an_honest_notebook_is_within_every_bound(tmp_path):
    nb = kit.read(kit.REPO / "solutions" / "mha" / "05_assembly.ipynb")
    path = tmp_path / "05.ipynb"
    path.write_text(json.dumps(nb))
    assert notebooks.read_submission(path)[0] is not None
