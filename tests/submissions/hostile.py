"""Hostile submissions: what a student (or a broken tool) can hand in besides honest code.

Each entry builds one student's folder from the course's notebooks, and says what grading must
give it: points per notebook (a notebook not listed was not handed in and scores 0) and a phrase
the feedback of a notebook must contain. They are graded in one batch with two honest students
around them; tests/test_exercises_hostile.py also checks that the course files, every other
student's grade and the machine are left as they were.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Callable

from . import kit
from .mutants import MUTANTS

P, S, M, O, A = "01_project", "02_split_heads", "03_merge_heads", "04_output_projection", "05_assembly"
K, G = "06_kv_cache", "07_grouped_query"
FULL = {P: 3, S: 2, M: 2, O: 3, A: 5, K: 9, G: 7}  # the README's points table
WRONG_SPLIT = next(m for m in MUTANTS if m.student == "m06_split_no_transpose")


@dataclass(frozen=True)
class Hostile:
    student: str
    build: Callable            # course -> {notebook: dict | bytes | str}
    points: dict               # notebook -> points expected
    says: dict = field(default_factory=dict)   # notebook -> phrase in its feedback
    extra: Callable | None = None              # course -> None: files beside the notebooks

    def submit(self, course) -> None:
        kit.submit(course, self.student, self.build(course))
        if self.extra:
            self.extra(course, course / "submitted" / self.student / kit.ASSIGNMENT)


def _wrong_split(course):
    return kit.filled(course, S, {"split_heads": WRONG_SPLIT.answer(kit.solution_cells(S)["split_heads"])})


def _grade_cells(nb):
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]


def _with_answer(course, notebook, cell, code):
    return kit.filled(course, notebook, {cell: code})


def edited_locked_cells(course):
    """A wrong split_heads, both test cells replaced by `pass`, the read-only setup cell edited."""
    nb = _wrong_split(course)
    for cell in _grade_cells(nb):
        cell["source"] = "pass  # tests? what tests?\n"
    next(c for c in nb["cells"] if kit.grade_id(c) == "setup_02")["source"] = "import numpy as np\nnp = None\n"
    return {S: nb}


def deleted_test_cells(course):
    nb = kit.filled(course, S)
    nb["cells"] = [c for c in nb["cells"] if c not in _grade_cells(nb)]
    return {S: nb}


def stripped_all_metadata(course):
    """A correct project notebook saved by a tool that drops every cell's metadata."""
    nb = kit.filled(course, P)
    for cell in nb["cells"]:
        cell["metadata"] = {}
    return {P: nb}


def broken_schema_and_extra_grade_cells(course):
    """Correct split_heads; schema_version deleted, every test cell duplicated, and a new grade cell worth 100."""
    nb = kit.filled(course, S)
    for cell in _grade_cells(nb):
        del cell["metadata"]["nbgrader"]["schema_version"]
    nb["cells"] += [json.loads(json.dumps(c)) for c in _grade_cells(nb)]
    bonus = json.loads(json.dumps(_grade_cells(nb)[0]))
    bonus["metadata"]["nbgrader"].update(grade_id="test_bonus", points=100)
    nb["cells"].append(bonus)
    return {S: nb}


def endless_cell(course):
    """A correct project notebook, then a split_heads cell that never ends (and ignores interrupts): the
    loop sets what split_heads reads, so it is reached and runs."""
    loop = ("def split_heads(x, num_heads):\n    return ready\n\n\n"
            "while True:\n    try:\n        ready = False\n    except KeyboardInterrupt:\n        pass\n")
    return {P: kit.filled(course, P), S: _with_answer(course, S, "split_heads", loop)}


def slow_just_under_the_limit(course):
    """Each call spins for just under the per-test limit: the notebook budget stops it."""
    spin = ("def merge_heads(x):\n    import math\n    total = 0.0\n    for i in range(10 ** 9):\n"
            "        total += math.sqrt(i)\n    return x\n")
    return {M: _with_answer(course, M, "merge_heads", spin)}


def memory_blow_up_in_one_test(course):
    """project allocates 8 TB when given a bias: only the bias test is lost."""
    code = ("def project(x, w, b=None):\n    if b is not None:\n        np.ones((1 << 40,))\n"
            "        return x @ w + b\n    return x @ w\n")
    return {P: _with_answer(course, P, "project", code)}


def invalid_json(course):
    return {P: kit.filled(course, P), S: b'{"cells": [ this is not JSON'}


def huge_output(course):
    """A correct project notebook whose try-it cell prints 100 MB, and whose answer prints 20 MB per call."""
    nb = kit.filled(course, P)
    cell = next(c for c in nb["cells"] if c.get("id") == "try_project")
    cell["source"] = "print('x' * 100_000_000)\n"
    answer = next(c for c in nb["cells"] if kit.grade_id(c) == "project")
    answer["source"] = answer["source"].replace('"""\n', '"""\n    print("y" * 20_000_000)\n', 1)
    return {P: nb}


def patched_numpy(course):
    """A wrong split_heads that also makes every NumPy comparison succeed in its own process: split_heads
    does not read np, so the patch is not reached and never runs (the checks run outside anyway); the wrong
    split scores what it is worth."""
    nb = _wrong_split(course)
    sol = next(c for c in nb["cells"] if kit.grade_id(c) == "split_heads")
    sol["source"] += ("\nnp.allclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True\n"
                      "np.testing.assert_allclose = lambda *a, **k: None\n")
    return {S: nb}


def imports_the_checks(course):
    """A wrong split_heads that imports the course's checks to switch them off: split_heads does not reach
    that code, so it never runs, and the wrong split scores what it is worth."""
    nb = _wrong_split(course)
    sol = next(c for c in nb["cells"] if kit.grade_id(c) == "split_heads")
    sol["source"] = "import mha_checks\nmha_checks.judge = None\n" + sol["source"]
    return {S: nb}


SOLUTIONS_FILE = str(kit.REPO / "solutions" / "mha" / "01_project.ipynb")


def reads_course_files(course):
    """project reads the solutions and the gradebook with NumPy and puts them in its error message."""
    code = ("def project(x, w, b=None):\n"
            f"    data = np.fromfile({SOLUTIONS_FILE!r}, dtype=np.uint8)\n"
            "    raise ValueError(bytes(data[:2000]).decode())\n")
    return {P: _with_answer(course, P, "project", code)}


def writes_the_gradebook(course):
    """merge_heads is right, and tries to overwrite the gradebook and a classmate's notebook first."""
    target = str(course / "gradebook.db")
    other = str(course / "submitted" / "h99_honest_last" / "mha" / "01_project.ipynb")
    code = ("def merge_heads(x):\n"
            f"    for path in ({target!r}, {other!r}, '/tmp/x'):\n"
            "        try:\n            np.zeros(3).tofile(path)\n        except OSError:\n            pass\n"
            "    b, h, t, d = x.shape\n    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)\n")
    return {M: _with_answer(course, M, "merge_heads", code)}


def private_torch_kernel(course):
    """multi_head_attention through torch's private math kernel."""
    code = ("def multi_head_attention(query, key, value, mha, causal=False):\n"
            "    return torch._scaled_dot_product_attention_math(query, key, value)\n")
    return {A: _with_answer(course, A, "multi_head_attention", code)}


def obfuscated_kernel(course):
    """multi_head_attention reaching F.scaled_dot_product_attention through getattr and a built string."""
    code = ("def multi_head_attention(query, key, value, mha, causal=False):\n"
            "    kernel = getattr(F, 'scaled_dot_' + 'product_attention')\n"
            "    return kernel(query, key, value), None\n")
    return {A: _with_answer(course, A, "multi_head_attention", code)}


def calls_the_module(course):
    """multi_head_attention that just calls the mha module it is given (torch's own answer)."""
    code = ("def multi_head_attention(query, key, value, mha, causal=False):\n"
            "    helper = [mha][0]\n"
            "    out, weights = helper(query, key, value, average_attn_weights=False)\n"
            "    return out, weights\n")
    return {A: _with_answer(course, A, "multi_head_attention", code)}


# --- ready-made answers through routes of each class of issue 14 (each must score 0) ---------------
_MHA = "def multi_head_attention(query, key, value, mha, causal=False):\n"
_MASK = ("    mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).triu(1) if causal else None\n")
_ARGS = ("(query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), mha.embed_dim, mha.num_heads,\n"
         "        mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0, mha.out_proj.weight, mha.out_proj.bias,\n"
         "        attn_mask=mask, average_attn_weights=False)\n")
READY_MADE = {
    # re-exports of what the rule refuses, through modules it admits
    "builtins_via_torch": _MHA + _MASK + "    k = torch.builtins.getattr(F, 'multi_head_attention_forward')\n"
                          "    out, w = k" + _ARGS + "    return out.transpose(0, 1), w\n",
    "attrgetter_via_typing": "import typing\n\n" + _MHA + _MASK
                             + "    k = typing.operator.attrgetter('nn.functional.multi_head_attention_forward')(torch)\n"
                             "    out, w = k" + _ARGS + "    return out.transpose(0, 1), w\n",
    # strings to names
    "exec_of_a_hex_string": "import dataclasses\n\n" + _MHA
                            + "    code = bytes.fromhex('6b203d20462e7363616c65645f646f745f70726f647563745f617474656e74696f6e').decode()\n"
                            "    space = {'F': F}\n    dataclasses.builtins.exec(code, space)\n"
                            "    return space['k'](query, key, value), None\n",
    "getattr_computed": _MHA + "    name = ''.join(['scaled_dot', '_product', '_attention'])\n"
                        "    return getattr(F, name)(query, key, value, is_causal=causal), None\n",
    # syntax the old rule did not look into
    "star_import": "from torch.nn.functional import *\n\n" + _MHA + _MASK
                   + "    out, w = multi_head_attention_forward" + _ARGS + "    return out.transpose(0, 1), w\n",
    "match_type_pattern": _MHA + _MASK + "    match type(mha):\n        case type(__base__=base):\n"
                          "            return base.forward(mha, query, key, value, attn_mask=mask)\n",
    "match_class_pattern": _MHA + _MASK + "    match F:\n        case object(multi_head_attention_forward=k):\n"
                           "            out, w = k" + _ARGS + "            return out.transpose(0, 1), w\n",
    # aliases and class bodies
    "top_level_alias": "solve = F.multi_head_attention_forward\n\n" + _MHA + _MASK
                       + "    out, w = solve" + _ARGS + "    return out.transpose(0, 1), w\n",
    "class_body": "class Kernels:\n    mha = F.multi_head_attention_forward\n\n\n" + _MHA + _MASK
                  + "    out, w = Kernels.mha" + _ARGS + "    return out.transpose(0, 1), w\n",
    # private kernels
    "torch_ops_native": _MHA + "    return torch.ops.aten._native_multi_head_attention(query, key, value, mha.embed_dim,\n"
                        "        mha.num_heads, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias,\n"
                        "        need_weights=True, average_attn_weights=False)\n",
    # the runtime guard undone (there is none now: these reach nothing)
    "guard_removed": "import sys\nsys.modules['calling'].mha_stand_in = lambda spec: None\n\n" + _MHA
                     + "    delattr(type(mha), '__call__')\n    return mha(query, key, value)\n",
    "unguarded_base_class": _MHA + _MASK + "    base = type(mha).__mro__[1]\n"
                            "    return base.forward(mha, query, key, value, attn_mask=mask, average_attn_weights=False)\n",
    # the allowlist's own edges
    "frame_of_a_generator": _MHA + "    frame = (i for i in [0]).gi_frame\n"
                            "    k = frame.f_builtins['getattr'](F, 'scaled_dot_product_attention')\n"
                            "    return k(query, key, value, is_causal=causal), None\n",
    "exception_carrying_the_module": _MHA + "    try:\n        F.no_such_name\n    except AttributeError as err:\n"
                                     "        k = err.obj.scaled_dot_product_attention\n"
                                     "    return k(query, key, value, is_causal=causal), None\n",
    "module_in_a_comprehension": _MHA + "    k = [m for m in [F]][0].scaled_dot_product_attention\n"
                                 "    return k(query, key, value, is_causal=causal), None\n",
    "default_argument_and_decorator": "import functools\n\n@functools.partial(functools.partial, "
                                      "kernel=F.scaled_dot_product_attention)\n"
                                      "def multi_head_attention(query, key, value, mha, causal=False, kernel=None):\n"
                                      "    return kernel(query, key, value, is_causal=causal), None\n",
    "class_of_a_value": _MHA + "    torch_module = query.__class__.__module__\n"
                        "    return query.__class__.__dict__['softmax'](query, -1), torch_module\n",
    "dunder_dict_and_vars": _MHA + "    k = F.__dict__.get('scaled_dot_product_attention') or vars(F)['scaled_dot_product_attention']\n"
                            "    return k(query, key, value, is_causal=causal), None\n",
}


def ready_made(route: str):
    return lambda course: {A: _with_answer(course, A, "multi_head_attention", READY_MADE[route])}


def symlinked_notebook(course):
    return {}


def _symlinks(course, folder):
    os.symlink(SOLUTIONS_FILE, folder / f"{P}.ipynb")
    os.symlink("/etc/passwd", folder / "leak.ipynb")
    (folder / "notes.txt").write_text("extra file")


def renamed_notebook(course):
    return {f"{S} (1)": kit.filled(course, S)}


def honest(course):
    return {n: kit.filled(course, n) for n in kit.NOTEBOOKS}


def honest_two(course):
    return {n: kit.filled(course, n) for n in (P, A)}


HOSTILE = [
    Hostile("h00_honest_first", honest_two, {P: 3, A: 5}),
    Hostile("h01_edited_locked_cells", edited_locked_cells, {S: 1}),
    Hostile("h02_deleted_test_cells", deleted_test_cells, {S: 2}),
    Hostile("h03_stripped_all_metadata", stripped_all_metadata, {P: 3}, {P: "lost its nbgrader metadata"}),
    Hostile("h04_schema_and_extra_grade_cells", broken_schema_and_extra_grade_cells, {S: 2}),
    Hostile("h05_endless_cell", endless_cell, {P: 3, S: 0}, {S: "did not finish"}),
    Hostile("h06_slow_just_under_the_limit", slow_just_under_the_limit, {M: 0}, {M: "took too long"}),
    Hostile("h07_memory_in_one_test", memory_blow_up_in_one_test, {P: 2}),
    Hostile("h08_invalid_json", invalid_json, {P: 3, S: 0}, {S: "not valid JSON"}),
    Hostile("h09_huge_output", huge_output, {P: 3}),
    Hostile("h10_patched_numpy", patched_numpy, {S: 1}),  # the patch is not reached: never run
    Hostile("h11_imports_the_checks", imports_the_checks, {S: 1}),  # the import reaches no test: never run
    Hostile("h12_reads_course_files", reads_course_files, {P: 1}, {P: "np.fromfile"}),  # project's tests refused
    #                                                          before it runs; fuse_heads (the reference) scores
    Hostile("h13_writes_the_gradebook", writes_the_gradebook, {}, {M: "tofile"}),  # refused before it runs
    Hostile("h14_private_torch_kernel", private_torch_kernel, {A: 0}, {A: "_scaled_dot_product_attention_math"}),
    Hostile("h15_obfuscated_kernel", obfuscated_kernel, {A: 0}, {A: "getattr"}),
    Hostile("h16_calls_the_module", calls_the_module, {A: 0}),
    Hostile("h17_symlinks_and_extra_files", symlinked_notebook, {}, {P: "not a regular file"}, extra=_symlinks),
    Hostile("h18_renamed_notebook", renamed_notebook, {S: 2}),
    Hostile("h99_honest_last", honest, FULL),
] + [Hostile(f"r{i:02d}_{route}", ready_made(route), {}, {A: "Not run: the code this test calls"})
     for i, route in enumerate(READY_MADE)] + [
    # admitted by the rule (it names nothing refused), and worth nothing: the stand-in computes no attention
    Hostile("r90_admitted_call_of_the_stand_in", lambda course: {A: _with_answer(course, A, "multi_head_attention",
            _MHA + "    match mha:\n        case object(out_proj=layer):\n            return mha(query, key, value)\n")},
            {}, {A: "calling the module"}),
]
