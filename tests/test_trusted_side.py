"""The trusted side of grading: each notebook read once per run, every argument compared outside, bounded work.

Through the grading command (the local threads and Dask): a file swapped between planning and reading
is graded as read, on inputs drawn from those bytes, and stamped with their key; two submissions of one
student never share a draw; a refused file is stamped as refused and keeps no earlier grade; a notebook
handed in again while a run grades it is graded by the next run; a linked assignment folder is named;
deep JSON stops nothing under Dask. Beneath that: planning opens no notebook, each file is read once,
JSON nesting is counted before decoding, an answer frame at the schema's limits is read as that fact, and
what a graded function receives is either memory compared after the call or cannot be changed in place
(tests/submissions/untrusted.py tries it in the sandbox: u16-u18).

The grading commands here run with --unsafe-no-sandbox: what they test happens outside the sandbox (the
sandbox's own tests are tests/test_sandbox.py), and the student code they run is this file's.
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from mha_checks import calling, hidden, judge
from mha_checks.hidden import hidden_cases
from mha_grader.trusted import frames, jobs, notebooks, secret
from mha_grader.trusted.course import Course
from submissions import kit
from submissions.hostile import WRONG_SPLIT

S = "02_split_heads"
BETWEEN = kit.REPO / "tests" / "submissions" / "between_plan_and_read.py"
KEY = b"0123456789abcdef" * 4


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("reading") / "course")
    (course.parent / "course.secret").write_bytes(KEY + b"\n")
    (course.parent / "course.secret").chmod(0o600)
    return course


def grade(course, *args: str, replace: tuple = ()) -> subprocess.CompletedProcess:
    """The grading command; ``replace`` = (when, source, target): see submissions/between_plan_and_read.py."""
    program = [str(BETWEEN), *map(str, replace)] if replace else ["-m", "mha_grader"]
    return subprocess.run([sys.executable, *program, "--course", str(course), "grade", "--unsafe-no-sandbox",
                           "--test-seconds", "5", *args], env=kit.grader_env(course.parent / "course.secret"),
                          capture_output=True, text=True, timeout=600)


def quoting(course, tag: str) -> bytes:
    """A split_heads notebook that raises with the first element of its input (its feedback quotes it)."""
    code = f"def split_heads(x, num_heads):\n    # {tag}\n    raise ValueError(str(float(x[0, 0, 0])))\n"
    return json.dumps(kit.filled(course, S, {"split_heads": code})).encode()


def first_inputs(course, student: str, raw: bytes) -> set[str]:
    """The first element of each test's first input, as drawn for these bytes of this student's notebook."""
    digest = hashlib.sha256(raw).hexdigest()
    return {str(float(np.asarray(hidden_cases(g.id, secret.rng(KEY, "mha", S, g.id, student, digest))[0].args[0])
                      [0, 0, 0])) for g in Course(course).releases[S].grade_cells}


def stamp_key(course, student: str) -> str:
    stamp = json.loads((course / "autograded" / student / "mha" / ".graded.json").read_text())[S]
    return stamp["key"] if isinstance(stamp, dict) else stamp


def key_of(course, raw: bytes) -> str:
    return Course(course).key(hashlib.sha256(raw).hexdigest(), secret.fingerprint(KEY))


def score(course, student: str) -> float:
    return sum(v for k, v in kit.scores(course)[student][S].items() if k != "needs_manual_grade")


def linked(course, student: str):
    """The student's split_heads file as a link (to a right notebook elsewhere) when the run plans."""
    target = course / "submitted" / student / "mha" / f"{S}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    elsewhere = course.parent / f"{student}-elsewhere.ipynb"
    elsewhere.write_text(json.dumps(kit.filled(course, S)))
    target.unlink(missing_ok=True)
    target.symlink_to(elsewhere)
    return target


def test_a_file_swapped_between_plan_and_read_is_graded_drawn_for_and_stamped_as_read(course):
    """A link when the run plans (refused: it would draw nothing), a notebook quoting its inputs when it is
    read: graded on the inputs drawn from the bytes read, stamped with their key. Twice, with two
    submissions: they share no input (README: "two submissions of one student never share a draw")."""
    quoted = []
    for tag in ("first", "second"):
        target = linked(course, "swapper")
        raw = quoting(course, tag)
        (course.parent / "swapped.ipynb").write_bytes(raw)
        run = grade(course, "--student", "swapper", replace=("planned", course.parent / "swapped.ipynb", target))
        assert run.returncode == 0, run.stderr[-2000:]
        text, drawn = kit.feedback_text(course, "swapper", S), first_inputs(course, "swapper", raw)
        assert all(value in text for value in drawn), (sorted(drawn), text[:1500])
        assert stamp_key(course, "swapper") == key_of(course, raw)
        quoted.append(drawn)
    assert not quoted[0] & quoted[1]


def test_a_refused_file_is_stamped_as_refused_and_keeps_no_earlier_grade(course):
    """Full marks for a right notebook swapped in after planning; then the file is a link when the run reads
    it: that is graded (0, why, named in notes.csv and the summary), not kept from the last run."""
    target = linked(course, "keeper")
    (course.parent / "right.ipynb").write_text(json.dumps(kit.filled(course, S)))
    run = grade(course, "--student", "keeper", replace=("planned", course.parent / "right.ipynb", target))
    assert run.returncode == 0 and score(course, "keeper") == 2, run.stderr[-2000:]
    linked(course, "keeper")
    run = grade(course, "--student", "keeper")
    assert run.returncode == 0, run.stderr[-2000:]
    assert score(course, "keeper") == 0
    assert "is not a regular file" in kit.feedback_text(course, "keeper", S)
    assert "keeper/02_split_heads" in (course / "notes.csv").read_text() and "keeper/02_split_heads" in run.stdout
    assert "This run graded 0 notebook(s)" in grade(course, "--student", "keeper").stdout  # stamped as refused


def test_a_notebook_handed_in_again_while_the_run_grades_it_is_graded_by_the_next_run(course):
    """README: "A notebook handed in again while a run grades it is noted in the summary ... and graded by
    the next run." The new version replaces the file after it was read, before it is judged."""
    kit.submit(course, "again", {S: kit.filled(course, S)})
    wrong = course.parent / "wrong.ipynb"
    wrong.write_text(json.dumps(kit.filled(course, S, {"split_heads": WRONG_SPLIT.answer(
        kit.solution_cells(S)["split_heads"])})))
    run = grade(course, "--student", "again", "--notebook", S,
                replace=("read", wrong, course / "submitted" / "again" / "mha" / f"{S}.ipynb"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert score(course, "again") == 2  # graded as read
    assert "again/02_split_heads: changed during the run" in (course / "notes.csv").read_text()
    run = grade(course, "--student", "again", "--notebook", S)
    assert "This run graded 1 notebook(s)" in run.stdout, run.stdout + run.stderr[-2000:]
    assert score(course, "again") == 1  # the new version: its values test fails


def test_a_linked_or_missing_assignment_folder_is_named(course):
    """A student whose assignment folder is a link (never followed) and one without an assignment folder:
    nothing of theirs is graded, and both are named in notes.csv and the summary."""
    real = course.parent / "real-folder"
    real.mkdir()
    (real / f"{S}.ipynb").write_text(json.dumps(kit.filled(course, S)))
    (course / "submitted" / "lnk").mkdir(parents=True)
    (course / "submitted" / "lnk" / "mha").symlink_to(real)
    (course / "submitted" / "nothing").mkdir()
    run = grade(course, "--student", "nobody-else")
    assert run.returncode == 0, run.stderr[-2000:]
    notes = (course / "notes.csv").read_text()
    assert "lnk: submitted/lnk/mha is not a folder" in notes and "nothing: submitted/nothing holds no mha" in notes
    summary = next(line for line in run.stdout.splitlines() if line.startswith("Not graded"))
    assert "lnk" in summary and "nothing" in summary
    assert "lnk" not in kit.scores(course)


def test_deep_json_stops_nothing_under_dask(course):
    """A notebook nested 700 deep (valid JSON, which Python decodes) is refused by its nesting without being
    decoded; the run goes on and grades the others (the coordinator once decoded it, and could not send it
    to a worker: RecursionError, and no grades for anybody)."""
    nb = kit.filled(course, S)
    nb["metadata"]["deep"] = "DEEP"
    kit.submit(course, "deep", {S: json.dumps(nb).replace('"DEEP"', "[" * 700 + "]" * 700)})
    kit.submit(course, "fine", {S: kit.filled(course, S)})
    run = grade(course, "--student", "deep", "--student", "fine", "--notebook", S, "--scheduler", "local",
                "--workers", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert score(course, "fine") == 2 and score(course, "deep") == 0
    assert f"nested more than {notebooks.MAX_JSON_DEPTH} levels deep" in kit.feedback_text(course, "deep", S)


# --- beneath: planning, making a job, reading bounded ----------------------------------------

def _args(**kw):
    return argparse.Namespace(**{"student": [], "notebook": [], "force": False, **kw})


def test_planning_opens_no_notebook_and_each_file_is_read_once(course, monkeypatch):
    """Plan a student with a named notebook, a renamed one and another file: no file is opened while
    planning; making their jobs reads each file once (the other .ipynb files are looked at by four jobs).
    Stamped, they are not planned again while their files keep their status."""
    named, renamed = kit.filled(course, "01_project"), kit.filled(course, "03_merge_heads")
    kit.submit(course, "once", {"01_project": named, "mine": renamed, "notes": {"cells": []}})
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    the_course = Course(course)
    records, _ = jobs.plan(the_course, KEY, _args(student=["once"]))
    assert not [p for p in opened if "/submitted/" in p], opened
    assert {r["notebook"] for r in records} == set(kit.NOTEBOOKS)
    assert all(set(r) <= {"student", "notebook", "path", "stamped", "candidates", "missing", "looking"}
               for r in records)  # small records: no bytes, no draw
    make = jobs.Maker(the_course, KEY)
    made = {r["notebook"]: make(r) for r in records}
    reads = [p for p in opened if "/submitted/once/" in p]
    assert sorted(reads) == sorted(set(reads)) and len(reads) == 3, reads  # 01_project, mine, notes: once each
    assert made["03_merge_heads"]["raw"] == (course / "submitted/once/mha/mine.ipynb").read_bytes()
    assert made["02_split_heads"]["raw"] is None and made["02_split_heads"]["reason"] == "was not handed in"
    assert not make.renamed  # nothing kept once the student's jobs are made
    the_course.stamp("once", {r["notebook"]: {**r["stamp"], "read_ns": r["stamp"]["read_ns"] + 10 * jobs.RACY_NS}
                              for r in records})  # (as if read long after the files were written)
    assert jobs.plan(the_course, KEY, _args(student=["once"]))[0] == []
    (course / "submitted/once/mha/notes.ipynb").write_text('{"cells": [], "metadata": {}}')
    assert {r["notebook"] for r in jobs.plan(the_course, KEY, _args(student=["once"]))[0]} == \
        set(kit.NOTEBOOKS) - {"01_project"}  # another candidate: the missing ones are looked for again


def test_a_job_whose_bytes_were_graded_comes_back_unchanged(course):
    kit.submit(course, "same", {S: kit.filled(course, S)})
    the_course = Course(course)
    [record] = jobs.plan(the_course, KEY, _args(student=["same"], notebook=[S]))[0]
    job = jobs.Maker(the_course, KEY)(record)
    assert job["raw"] is not None and job["seeds"]
    the_course.stamp("same", {S: record["stamp"]})
    (course / "submitted/same/mha" / f"{S}.ipynb").touch()  # the status changes, the bytes do not
    [again] = jobs.plan(the_course, KEY, _args(student=["same"], notebook=[S]))[0]
    assert jobs.Maker(the_course, KEY)(again) == {"student": "same", "notebook": S, "raw": None, "reason": "",
                                                  "seeds": {}, "unchanged": True}
    settled = {**again["stamp"], "read_ns": again["stamp"]["status"][5] + jobs.RACY_NS + 1}
    the_course.stamp("same", {S: settled})  # read well after its last change: trusted
    assert jobs.plan(the_course, KEY, _args(student=["same"], notebook=[S]))[0] == []
    the_course.stamp("same", {S: {**settled, "read_ns": settled["status"][5] + 1}})  # read within the same tick
    assert len(jobs.plan(the_course, KEY, _args(student=["same"], notebook=[S]))[0]) == 1


def test_a_job_carries_seeds_that_draw_what_the_secret_draws_for_its_submission(course):
    """A job carries one seed per grade cell (no key, no arrays: the cases are drawn where it is graded); drawn
    from them, every case is, array for array (dtype, layout, bytes), the one secret.rng draws for these bytes of
    this student's notebook, and another student's seeds are others."""
    kit.submit(course, "seeded", {S: kit.filled(course, S)})
    kit.submit(course, "other", {S: kit.filled(course, S)})
    the_course = Course(course)
    made = {r["student"]: jobs.Maker(the_course, KEY)(r)
            for r in jobs.plan(the_course, KEY, _args(student=["seeded", "other"], notebook=[S]))[0]}
    job, digest = made["seeded"], hashlib.sha256(made["seeded"]["raw"]).hexdigest()
    cells = [g.id for g in the_course.releases[S].grade_cells]
    assert list(job["seeds"]) == cells and all(type(seed) is int for seed in job["seeds"].values())
    assert not set(job["seeds"].values()) & set(made["other"]["seeds"].values())
    drawn = jobs.draw(job["seeds"])
    for cell in cells:
        wanted = hidden_cases(cell, secret.rng(KEY, "mha", S, cell, "seeded", digest))
        assert [(c.function, c.names, c.check, json.dumps(c.specs())) for c in drawn[cell]] == \
            [(c.function, c.names, c.check, json.dumps(c.specs())) for c in wanted]


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


def _random_json(rng: random.Random, depth: int):
    kind = rng.randrange(6) if depth < 12 else 5
    if kind == 0:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 1:
        return {"".join(rng.choice('[]{}"\\ab') for _ in range(3)): _random_json(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return rng.choice([1, 2.5, None, True, '"[', "\\", "}]", "\\\"{", "ü[", ""])


def test_json_nesting_is_counted_on_the_bytes_before_decoding():
    rng = random.Random(0)
    for _ in range(500):
        value = _random_json(rng, 0)
        assert notebooks.json_depth(json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()) == _depth(value)
    def nested(n: int) -> bytes:  # a notebook nested n deep
        return b'{"cells": [], "metadata": ' + b"[" * (n - 1) + b"]" * (n - 1) + b"}"
    assert notebooks.parse(nested(notebooks.MAX_JSON_DEPTH)) == ({"cells": [], "metadata": json.loads(
        "[" * (notebooks.MAX_JSON_DEPTH - 1) + "]" * (notebooks.MAX_JSON_DEPTH - 1))}, "")
    nb, reason = notebooks.parse(nested(notebooks.MAX_JSON_DEPTH + 1))
    assert nb is None and f"more than {notebooks.MAX_JSON_DEPTH} levels" in reason
    deep = b"[" * 3_000_000 + b"]" * 3_000_000  # deeper than any decoder recurses: never decoded
    assert notebooks.json_depth(deep) == 3_000_000 and notebooks.parse(deep)[0] is None


def test_an_answer_at_the_frame_schemas_limits_is_read_as_that_fact():
    """1.57 M values nested 4 deep (within the schema's items and depth): read as "more than MAX_VALUES",
    never handed to the judge (once 65 s of trusted work per notebook)."""
    huge = [[[[0.5] * 6 for _ in range(64)] for _ in range(64)] for _ in range(64)]
    outcome = frames.outcome({"result": huge, "mutated": []}, ["x"])
    assert outcome["result"] == {"$other": "a value of more than 20000 numbers, arrays and lists"}
    fine = [[[0.25] * 10] * 12] * 10  # 1,200 numbers: an answer's size
    assert frames.outcome({"result": fine}, ["x"])["result"] == fine


# --- every argument outside ------------------------------------------------------------------

CHANGES = {  # an attempt to change in place what a function receives, by kind of argument
    "list .clear()": ("test_fuse_heads", lambda w_heads, b_heads=None: w_heads.clear()),
    "list [i] =": ("test_fuse_heads", lambda w_heads, b_heads=None: w_heads.__setitem__(0, 0)),
    "list +=": ("test_fuse_heads", lambda w_heads, b_heads=None: w_heads.__iadd__([1])),
    "list .sort()": ("test_fuse_heads", lambda w_heads, b_heads=None: w_heads.sort(key=id)),
    "an item's .shape": ("test_fuse_heads", lambda w_heads, b_heads=None: setattr(w_heads[0], "shape", (1, -1))),
    "array .shape": ("test_split_heads_values", lambda x, h: setattr(x, "shape", (1, *x.shape))),
    "array .dtype": ("test_split_heads_values", lambda x, h: setattr(x, "dtype", np.int64)),
    "array .strides": ("test_split_heads_values", lambda x, h: setattr(x, "strides", x.strides)),
    "array .resize()": ("test_split_heads_values", lambda x, h: x.resize(x.shape, refcheck=False)),
    "mha attribute": ("test_mha_cross", lambda q, k, v, mha, causal=False: setattr(mha, "num_heads", 1)),
    "mha.out_proj attribute": ("test_mha_cross", lambda q, k, v, mha, causal=False:
                               setattr(mha.out_proj, "weight", torch.zeros(1))),
    "tensor .data =": ("test_mha_cross", lambda q, k, v, mha, causal=False:
                       setattr(mha.in_proj_weight, "data", torch.zeros(1))),
    "tensor .unsqueeze_()": ("test_mha_cross", lambda q, k, v, mha, causal=False: q.unsqueeze_(0)),
    "tensor .set_()": ("test_mha_cross", lambda q, k, v, mha, causal=False: q.set_(torch.zeros(3))),
    "elements written": ("test_split_heads_values", lambda x, h: x.__setitem__((0, 0, 0), 7.0)),
    "weights written": ("test_mha_cross", lambda q, k, v, mha, causal=False: mha.out_proj.bias.data.add_(1.0)),
}


@pytest.mark.parametrize("how", CHANGES)
def test_a_change_in_place_is_seen_whatever_the_argument(how):
    """Each kind of argument: the change is refused (the function's error, named as a change in place) or
    seen in the memory compared after the call; the same verdict in the visible tests' path as outside."""
    grade_id, fn = CHANGES[how]
    case = hidden.hidden_cases(grade_id, np.random.default_rng(0))[0]
    verdict = judge.judge(case, calling.call(fn, list(case.names), case.specs()))
    assert not verdict.passed and verdict.mistake.endswith(("changes its arguments in place",
                                                            "changes mha's parameters in place")), verdict


def test_reading_an_argument_works_as_on_the_callers_objects():
    """What honest code does with its arguments: a list copied, sliced, added to; views reshaped; results
    computed are ordinary arrays and tensors (a sum is a number)."""
    def fuse(w_heads, b_heads=None):
        heads = w_heads.copy() + w_heads[:0] + [] 
        heads.append(w_heads[-1])
        assert len(heads) == len(w_heads) + 1 and w_heads.index(w_heads[0]) == 0 and w_heads == list(w_heads)
        view = w_heads[0].T
        view.shape = view.shape  # a view is the function's own
        total = w_heads[0].sum()
        assert type(total) is np.float64 and type(w_heads[0] * 2) is np.ndarray
        return np.concatenate(list(w_heads), axis=1), None if b_heads is None else np.concatenate(b_heads)
    case = hidden.hidden_cases("test_fuse_heads", np.random.default_rng(0))[0]
    outcome = calling.call(fuse, list(case.names), case.specs())
    assert "error" not in outcome and outcome["mutated"] == [] and judge.judge(case, outcome).passed, outcome

    def mha_reads(q, k, v, mha, causal=False):
        w_q = mha.in_proj_weight.chunk(3)[0]
        assert type(w_q) is torch.Tensor and type(q.transpose(0, 1)) is torch.Tensor and mha.head_dim > 0
        assert repr(q).startswith("tensor(")
        return q
    case = hidden.hidden_cases("test_mha_cross", np.random.default_rng(0))[0]
    outcome = calling.call(mha_reads, list(case.names), case.specs())
    assert "error" not in outcome and outcome["mutated"] == [], outcome
