"""Hostile submissions against the trusted side: what the grader reads back from a job.

Each one attacks what happens after (or around) the student's code: the records the judge reads,
the harness that writes them, the inputs the sandbox holds, the work of reading a notebook.
They are graded with the static rule switched off (``without_static_rule.py``), so that the
layers beneath it face code the rule would refuse, with honest students around them, by
tests/test_untrusted.py. Points as in hostile.py: a notebook not listed scores 0.
"""
import json

from . import kit
from .hostile import FULL, Hostile, P, S, M, O, A

# Writes a line on every descriptor it may hold (in the old harness: the report channel).
SPRAY = '''
def _spray(line):
    import os
    for fd in range(3, 64):
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
'''


def _answer(course, notebook, cell, code):
    return {notebook: kit.filled(course, notebook, {cell: code})}


def forged_records(course):
    """project computes the right answer, then zeroes x in place and writes records saying nothing
    changed: its own outcome frames and full report records for every case."""
    forged = ('json.dumps({"result": out_encoded, "mutated": []}) + "\\n" + "".join(json.dumps({"test": t, "case": i, '
              '"outcome": {"result": out_encoded, "mutated": []}}) + "\\n" for t in ("test_project_values", '
              '"test_project_bias") for i in range(8))')
    code = (SPRAY + "def project(x, w, b=None):\n    import json, sys\n    out = x @ w + (0 if b is None else b)\n"
            "    out_encoded = sys.modules['calling'].encode(out)\n    x[...] = 0\n"
            f"    _spray({forged})\n    return out\n")
    return _answer(course, P, "project", code)


def lies_about_its_arguments(course):
    """project zeroes x in place after computing, and makes the harness's own comparison in its
    process say that nothing changed (calling._same)."""
    code = ("def project(x, w, b=None):\n    import sys\n"
            "    sys.modules['calling']._same = lambda before, after: True\n"
            "    out = x @ w + (0 if b is None else b)\n    x *= 0\n    return out\n")
    return _answer(course, P, "project", code)


def zeroes_the_weights_and_lies(course):
    """multi_head_attention is right, then zeroes mha's weights in place and hides it in its process."""
    reference = kit.solution_cells(A)["multi_head_attention"]
    code = reference.replace("def multi_head_attention(", "def _right(", 1) + (
        "\ndef multi_head_attention(query, key, value, mha, causal=False):\n    import sys\n"
        "    sys.modules['calling']._same = lambda before, after: True\n"
        "    out = _right(query, key, value, mha, causal)\n    with torch.no_grad():\n"
        "        mha.in_proj_weight.zero_()\n    return out\n")
    return _answer(course, A, "multi_head_attention", code)


def kills_the_harness(course):
    """merge_heads sends SIGKILL to the process that holds the report channel (its parent): that is pid 1
    of the job's namespace, under a uid of its own, and the filter refuses the student's code even its
    parent's pid (getppid) and any signal to pid 1: the call raises (0 for merge_heads), the harness
    lives on and grades the rest of the class's notebooks as before."""
    code = ("def merge_heads(x):\n    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n"
            "    b, h, t, d = x.shape\n    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)\n")
    return _answer(course, M, "merge_heads", code)


def reads_the_harness_memory(course):
    """split_heads is right only if every attempt to read or write the harness's memory failed."""
    code = ('''def split_heads(x, h):
    import ctypes, os
    parent, reached = os.getppid(), []
    for path in (f"/proc/{parent}/mem", f"/proc/{parent}/environ", f"/proc/{parent}/fd/3"):
        try:
            with open(path, "rb") as fh:
                fh.read(1)
            reached.append(path)
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(8)
    pair = (ctypes.c_size_t * 2)(ctypes.addressof(buffer), 8)
    remote = (ctypes.c_size_t * 2)(0x400000, 8)
    if libc.process_vm_readv(parent, pair, 1, remote, 1, 0) >= 0:
        reached.append("process_vm_readv")
    if reached:
        raise RuntimeError("reached the harness: " + ", ".join(reached))
    b, t, d = x.shape
    return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)
''')
    return _answer(course, S, "split_heads", code)


LIE = "    import sys\n    sys.modules['calling']._same = lambda before, after: True  # (the old harness asked it)\n"


def empties_its_lists_and_lies(course):
    """fuse_heads is right, then empties the caller's lists and makes its process say nothing changed: a list
    argument is handed over unchangeable, so the attempt is the function's error, judged outside."""
    reference = kit.solution_cells(P)["fuse_heads"]
    code = reference.replace("def fuse_heads(", "def _right(", 1) + (
        "\ndef fuse_heads(w_heads, b_heads=None):\n" + LIE + "    out = _right(w_heads, b_heads)\n"
        "    w_heads.clear()\n    return out\n")
    return _answer(course, P, "fuse_heads", code)


def rebinds_mhas_weights_and_lies(course):
    """multi_head_attention is right, then swaps mha's output weight for zeros (no memory of the caller's is
    written) and makes its process say nothing changed."""
    reference = kit.solution_cells(A)["multi_head_attention"]
    code = reference.replace("def multi_head_attention(", "def _right(", 1) + (
        "\ndef multi_head_attention(query, key, value, mha, causal=False):\n" + LIE +
        "    out = _right(query, key, value, mha, causal)\n"
        "    mha.out_proj.weight = torch.zeros_like(mha.out_proj.weight)\n    return out\n")
    return _answer(course, A, "multi_head_attention", code)


def reshapes_its_input_and_lies(course):
    """split_heads is right, then gives the caller's array another shape (no element changes) and makes its
    process say nothing changed."""
    code = ("def split_heads(x, num_heads):\n" + LIE + "    b, t, d = x.shape\n"
            "    out = x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)\n"
            "    x.shape = (1, b, t, d)  # (a unit axis more: possible for every view)\n    return out\n")
    return _answer(course, S, "split_heads", code)


def deep_json(course):
    """A notebook nested 700 deep in its metadata (valid JSON): refused by its nesting, never decoded."""
    nb = kit.filled(course, M)
    nb["metadata"]["deep"] = "DEEP"
    return {M: json.dumps(nb).replace('"DEEP"', "[" * 700 + "]" * 700)}


def malformed_cells_record(course):
    """A cell sends the harness a list of failed cells whose fields are lists (the TypeError of
    judging._missing once), numbered as the harness's own cells record is, then merge_heads is not defined."""
    line = json.dumps({"cells": [{"label": [1], "type": [2], "message": {"a": 1}, "line": [3]}], "seq": 0}) + "\n"
    code = SPRAY + f"_spray({line!r})\n"
    return _answer(course, M, "merge_heads", code)


def malformed_outcome(course):
    """output_projection sends outcomes whose error fields are lists and whose array lies about its size,
    with every number a request may bear (the harness takes only the frame numbered as its request): each
    such outcome is a value the grader cannot read, which costs the tests that call output_projection and
    no other (the per-head test, which calls the reference output_projection_per_head, keeps its point)."""
    bad = "".join(json.dumps({"error": {"type": ["T"], "message": [1], "line": "x"}, "seq": n}) + "\n" + json.dumps(
        {"result": {"$array": {"dtype": "float64", "shape": [10 ** 9], "data": "AAAA"}}, "seq": n}) + "\n"
        for n in range(1, 10))
    # (the tag is made at run time: the student's source is shown in their feedback, and the hidden-inputs test
    # looks for the schema's own words there)
    code = SPRAY + f"def output_projection(*args):\n    _spray({bad.replace('$array', '%array')!r}" \
        ".replace('%array', '$' + 'array'))\n    return None\n"
    return _answer(course, O, "output_projection", code)


def deep_frame(course):
    """output_projection sends its harness a frame nested 5,000 deep (the harness's own parser must
    survive it, and skips it: it bears no request's number), then returns the right answer."""
    reference = kit.solution_cells(O)["output_projection"]
    code = SPRAY + reference.replace("def output_projection(", "def _right(", 1) + (
        "\ndef output_projection(*args, **kwargs):\n    _spray('[' * 5000 + ']' * 5000 + '\\n')\n"
        "    return _right(*args, **kwargs)\n")
    return _answer(course, O, "output_projection", code)


def surrogates_and_escapes(course):
    """split_heads raises a 100 kB message with a lone surrogate and terminal escapes, in a class
    whose name holds escapes too (a class name cannot hold a lone surrogate)."""
    code = ("def split_heads(x, h):\n    name = '\\x1b]0;pwned\\x07\\r' + 'E' * 1000\n"
            "    error = type(name, (Exception,), {})\n"
            "    raise error('\\udcff \\x1b[2J\\r' + 'x' * 100_000)\n")
    return _answer(course, S, "split_heads", code)


def huge_class_names(course):
    """merge_heads returns an object whose class name is 2 MB."""
    code = "def merge_heads(x):\n    return type('Q' * 2_000_000, (), {})()\n"
    return _answer(course, M, "merge_heads", code)


def leaks_the_job(course):
    """project sends back everything the sandbox holds that is not its own cells: /job, /tmp."""
    code = ('''def project(x, w, b=None):
    import os
    found = []
    for folder in ("/job", "/tmp"):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                found.append(open(path, errors="replace").read())
    raise ValueError(" ".join(found)[-400:])
''')
    return _answer(course, P, "project", code)


def too_deep(course):
    """A notebook whose answer cell is nested past what the grader reads (a parser recursion once)."""
    return _answer(course, S, "split_heads", "x = " + "-" * 30_000 + "1\n")


def too_many_values(course):
    """A notebook under 8 MB holding 600,000 tiny JSON values in a cell's outputs."""
    nb = kit.filled(course, O)
    nb["cells"][0]["outputs"] = [[]] * 600_000
    return {O: nb}


def list_that_lies_about_its_length(course):
    """output_projection_per_head returns a list whose len() says 1 but which holds 100 items: that test
    alone fails (output_projection's two tests keep their points)."""
    code = ("class Lying(list):\n    def __len__(self):\n        return 1\n\n\n"
            "def output_projection_per_head(heads, w_o, b_o=None):\n    return Lying([0.0] * 100)\n")
    return _answer(course, O, "output_projection_per_head", code)


def integer_beyond_64_bits(course):
    """output_projection_per_head returns 2**70, which no 64-bit field holds: that test alone fails."""
    return _answer(course, O, "output_projection_per_head",
                   "def output_projection_per_head(heads, w_o, b_o=None):\n    return 2 ** 70\n")


def _clutter(course, folder):
    """A link, a folder, 40 stray files, one with a newline and an escape in its name."""
    (folder / "link.ipynb").symlink_to("/etc/passwd")
    (folder / "folder.ipynb").mkdir()
    for i in range(40):
        (folder / f"stray{i:02d}.txt").write_text("x")
    (folder / "evil\n\x1b[31mname.txt").write_text("x")


def surrogate_in_source(course):
    """A right project whose answer cell carries a lone surrogate in a comment (valid JSON)."""
    code = kit.solution_cells(P)["project"].replace("\n", "  # \udcff\n", 1)
    return _answer(course, P, "project", code)


def honest_with_clutter(course):
    return {n: kit.filled(course, n) for n in kit.NOTEBOOKS}


def honest(course):
    return {n: kit.filled(course, n) for n in kit.NOTEBOOKS}


UNTRUSTED = [
    Hostile("u00_honest_first", honest, FULL),
    Hostile("u01_forged_records", forged_records, {P: 1}, {P: "in place"}),
    Hostile("u02_lies_about_its_arguments", lies_about_its_arguments, {P: 1}, {P: "in place"}),
    Hostile("u03_zeroes_the_weights_and_lies", zeroes_the_weights_and_lies, {A: 0}, {A: "in place"}),
    Hostile("u04_kills_the_harness", kills_the_harness, {M: 0}, {M: "raised OSError"}),
    Hostile("u05_reads_the_harness_memory", reads_the_harness_memory, {S: 2}),
    Hostile("u06_malformed_cells_record", malformed_cells_record, {M: 0}, {M: "Could not be graded"}),
    Hostile("u07_malformed_outcome", malformed_outcome, {O: 1}, {O: "the grader cannot read"}),
    Hostile("u08_surrogates_and_escapes", surrogates_and_escapes, {S: 0}, {S: "raised"}),
    Hostile("u09_huge_class_names", huge_class_names, {M: 0}, {M: "QQQ"}),
    Hostile("u10_leaks_the_job", leaks_the_job, {P: 1}, {P: "raised ValueError"}),
    Hostile("u11_too_deep", too_deep, {S: 0}, {S: "nested too deeply"}),
    Hostile("u12_too_many_values", too_many_values, {O: 0}, {O: "JSON values"}),
    Hostile("u13_honest_with_clutter", honest_with_clutter, FULL, extra=_clutter),
    Hostile("u14_deep_frame", deep_frame, {O: FULL[O]}),
    Hostile("u15_surrogate_in_source", surrogate_in_source, {P: 3}),
    Hostile("u16_empties_its_lists_and_lies", empties_its_lists_and_lies, {P: 2}, {P: "changes `w_heads` in place"}),
    Hostile("u17_rebinds_mhas_weights_and_lies", rebinds_mhas_weights_and_lies, {A: 0},
            {A: "changes `mha` in place"}),
    Hostile("u18_reshapes_its_input_and_lies", reshapes_its_input_and_lies, {S: 0}, {S: "changes `x` in place"}),
    Hostile("u19_deep_json", deep_json, {M: 0}, {M: "nested more than 64 levels deep"}),
    Hostile("u20_list_that_lies_about_its_length", list_that_lies_about_its_length, {O: 2},
            {O: "of more than 64 items"}),
    Hostile("u21_integer_beyond_64_bits", integer_beyond_64_bits, {O: 2}, {O: "beyond 64 bits"}),
    Hostile("u99_honest_last", honest, FULL),
]
