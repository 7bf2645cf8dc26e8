"""Submissions read as data: which cells of a student's notebook the grader runs, and why.

Nothing the student hands in is executed or followed here: a submission is a regular file (not
a link) of bounded size, read once (:func:`read_file`), then parsed as JSON of bounded size and
nesting, with bounded cells (:func:`parse`). The
student's cells are matched to the release's by nbgrader grade id; where the metadata was
stripped or edited, a solution cell is recognised by the function it defines. Grade (test) cells are never run: the hidden tests are the grader's.
"""
import ast
import hashlib
import json
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAX_NOTEBOOK_BYTES = 8 * 1024 * 1024  # the file
MAX_JSON_VALUES = 500_000             # values in it (bounds the memory its decoding takes, ~70 MB at most)
MAX_CELLS = 1_000
MAX_CODE_CHARS = 100_000              # one code cell's source
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_JSON_DEPTH = 64                   # how deep its JSON nests (a notebook nests 6 or so; outputs a little more)
MAX_AST_NODES, MAX_AST_DEPTH = 50_000, 100  # the syntax trees of all its code cells together; one's depth
MEMO_SOURCES, MEMO_CHARS = 512, 10_000  # each memo of what reading a cell found: this many sources of up to this length


@dataclass(frozen=True)
class GradeCell:
    id: str
    points: float
    docstring: str  # what the test checks, in the release's words


@dataclass
class Release:
    """One notebook of the student version (exercises/<assignment>/<name>.ipynb)."""
    name: str
    cells: list
    grade_cells: list = field(default_factory=list)
    setup: list = field(default_factory=list)      # read-only code cells, by release source
    solutions: dict = field(default_factory=dict)  # solution grade id -> names of the functions it defines


@dataclass
class Program:
    """What runs in the sandbox for one submitted notebook."""
    cells: list = field(default_factory=list)      # {"label", "source"}
    notes: list = field(default_factory=list)      # what the instructor (and student) should know
    missing: list = field(default_factory=list)    # solution cells not found


def source(cell: dict) -> str:
    """A cell's source as valid text (JSON can carry a lone surrogate, which no file or page can hold)."""
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return LONE_SURROGATE.sub("\ufffd", src) if isinstance(src, str) else ""


def nbgrader_meta(cell: dict) -> dict:
    meta = cell.get("metadata")
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str) else {}


class _Memo(dict):
    """What reading a cell found, by its source, for the MEMO_SOURCES sources of up to MEMO_CHARS characters
    kept last (first in, first out): a class's notebooks repeat most cells (the release's, and those students
    leave as handed out). Immutable values only; what raises is never kept. Each reader parses in its own
    frame, as before: how deep the parser may nest depends on the frames above it."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def keep(self, code: str, value):
        if len(code) <= MEMO_CHARS:
            with self.lock:
                if len(self) >= MEMO_SOURCES:
                    del self[next(iter(self))]
                self[code] = value
        return value


_DEFINED, _FITTING = _Memo(), _Memo()  # a cell's functions; the syntax nodes of a cell within every bound


def defined_functions(code: str) -> list[str]:
    found = _DEFINED.get(code)
    if found is None:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return []
        defs = (n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        found = _DEFINED.keep(code, tuple(defs))
    return list(found)


def docstring(code: str) -> str:
    try:
        return (ast.get_docstring(ast.parse(code)) or "").strip()
    except (SyntaxError, ValueError):
        return ""


def load_release(folder: Path) -> dict[str, Release]:
    releases = {}
    for path in sorted(folder.glob("*.ipynb")):
        nb = json.loads(path.read_text())
        release = Release(path.stem, nb["cells"])
        for cell in nb["cells"]:
            meta = nbgrader_meta(cell)
            if cell.get("cell_type") != "code" or not meta:
                continue
            if meta.get("grade"):
                release.grade_cells.append(GradeCell(meta["grade_id"], float(meta["points"]), docstring(source(cell))))
            elif meta.get("solution"):
                release.solutions[meta["grade_id"]] = defined_functions(source(cell))
            elif meta.get("locked"):
                release.setup.append({"label": meta["grade_id"], "source": source(cell)})
        releases[path.stem] = release
    return releases


@dataclass(frozen=True)
class Read:
    """One read of a submitted file: its bytes, or why it was refused (then ``raw`` is None).

    ``status`` is what the file's status said just before its bytes were read (:func:`status`; of the
    link or folder itself when refused; None when there is nothing at the path), ``at_ns`` when."""
    raw: bytes | None
    status: list | None
    reason: str = ""
    at_ns: int = 0

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.raw).hexdigest() if self.raw is not None else ""


def status(path: Path | str | None) -> list | None:
    """What identifies a file's version without opening it: [type and mode, device, inode, size, mtime,
    ctime (ns)] of the path itself (a link is not followed), or None when nothing is there."""
    try:
        return _status(os.lstat(path)) if path else None
    except OSError:
        return None


def _status(info: os.stat_result) -> list:
    return [info.st_mode, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def read_file(path: Path | str) -> Read:
    """The bytes of a regular file of at most MAX_NOTEBOOK_BYTES, read once through one open descriptor
    (a link is never followed, nothing that is not a regular file is opened for reading), with the
    status of what was opened; or the refusal, with the status of what is at the path."""
    at = time.time_ns()
    try:
        info = os.lstat(path)
    except OSError as err:
        return Read(None, None, f"cannot be read ({err.strerror})", at)
    if not stat.S_ISREG(info.st_mode):
        return Read(None, _status(info), "is not a regular file (a link or a folder), so it is not read", at)
    if info.st_size > MAX_NOTEBOOK_BYTES:
        return Read(None, _status(info), f"is {info.st_size} bytes, more than the {MAX_NOTEBOOK_BYTES} a "
                                         "notebook may have", at)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:  # (replaced by a link since: ELOOP)
        return Read(None, _status(info), f"cannot be read ({err.strerror})", at)
    with os.fdopen(fd, "rb") as fh:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):  # replaced by a fifo or a device between lstat and open
            return Read(None, _status(opened), "is not a regular file (a link or a folder), so it is not read", at)
        try:
            raw = fh.read(MAX_NOTEBOOK_BYTES + 1)
        except OSError as err:
            return Read(None, _status(opened), f"cannot be read ({err.strerror})", at)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return Read(None, _status(opened), f"grew past the {MAX_NOTEBOOK_BYTES} bytes a notebook may have "
                                           "while it was read", at)
    return Read(raw, _status(opened), "", at)


def parse(raw: bytes) -> tuple[dict | None, str]:
    """(the notebook, "") or (None, why it is not graded), from a submitted file's bytes.

    The work is bounded whatever the bytes hold, each bound checked before the work it bounds: the
    number of values the JSON decodes to and its nesting (both counted on the bytes, before anything
    is decoded), its cells, each code cell's size and syntax tree (the static checks and the grader
    walk them); a notebook past a bound is not graded, and the reason says which bound."""
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")  # >= the containers and items it decodes to
    if values > MAX_JSON_VALUES:
        return None, f"holds more than {MAX_JSON_VALUES} JSON values, more than a notebook may have"
    if json_depth(raw) > MAX_JSON_DEPTH:
        return None, f"is nested more than {MAX_JSON_DEPTH} levels deep, more than a notebook is"
    try:
        nb = json.loads(raw)
    except (ValueError, RecursionError, MemoryError):
        return None, "is not a notebook (its file is not valid JSON)"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return None, "is not a notebook (it has no list of cells)"
    nb["cells"] = [c for c in nb["cells"] if isinstance(c, dict)]
    problem = _past_bounds(nb["cells"])
    return (None, problem) if problem else (nb, "")


JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
DEPTH_CHUNK = 1 << 20


def json_depth(raw: bytes) -> int:
    """How deep the JSON text ``raw`` nests (its brackets outside strings), in time linear in its
    length and memory of a few MB, without decoding it. Exact for valid JSON; for text that is not,
    at least the depth that a decoder reaches before it stops at the first error."""
    structure = np.frombuffer(JSON_STRING.sub(b"", raw), np.uint8)
    deepest = level = 0
    for start in range(0, len(structure), DEPTH_CHUNK):
        chunk = structure[start:start + DEPTH_CHUNK]
        steps = (chunk == ord("[")).astype(np.int32) + (chunk == ord("{")) - (chunk == ord("]")) - (chunk == ord("}"))
        levels = level + np.cumsum(steps, dtype=np.int64)
        deepest, level = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def read_submission(path: Path) -> tuple[dict | None, str, str]:
    """(notebook, sha256 of its bytes, "") or (None, sha256 or "", why it is not read): one read, then
    :func:`parse`."""
    read = read_file(path)
    if read.raw is None:
        return None, "", read.reason
    nb, reason = parse(read.raw)
    return nb, read.digest, reason


def _past_bounds(cells: list[dict]) -> str | None:
    """Which bound the cells exceed (a sentence), or None."""
    if len(cells) > MAX_CELLS:
        return f"has {len(cells)} cells, more than the {MAX_CELLS} the grader reads"
    nodes = 0
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        code = source(cell)
        if len(code) > MAX_CODE_CHARS:
            return f"has a code cell (cell {i + 1}) of {len(code)} characters, more than the {MAX_CODE_CHARS} allowed"
        count, problem = syntax_size(code, MAX_AST_NODES - nodes)
        if problem:
            return f"has a code cell (cell {i + 1}) {problem}"
        nodes += count
    return None


def syntax_size(code: str, budget: int) -> tuple[int, str | None]:
    """(nodes of ``code``'s syntax tree, None) when it has at most ``budget`` nodes and is at most
    MAX_AST_DEPTH deep (code that does not parse counts 0: the sandbox reports that as the cell's own
    error); else (its nodes so far, what it exceeds)."""
    fits = _FITTING.get(code)
    if fits is not None and fits <= budget:
        return fits, None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return 0, None
    except (RecursionError, MemoryError):
        return 0, f"nested too deeply to be read (more than {MAX_AST_DEPTH} levels)"
    count, todo = 0, [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        count += 1
        if count > budget:
            return count, f"that takes the notebook's code past {MAX_AST_NODES} syntax nodes"
        if depth > MAX_AST_DEPTH:
            return count, f"nested more than {MAX_AST_DEPTH} levels deep"
        todo += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return _FITTING.keep(code, count), None


def program(release: Release, nb: dict) -> Program:
    """The candidate cells for ``nb``: the release's read-only cells, then the student's code cells
    (solution cells by their grade id, the others as "cell N"), in the student's order. Which of their
    statements run is decided by the ready-made rule (:func:`mha_checks.admission.admit`): only what the
    graded functions reach, so a free cell's plots, timing and try-it comparisons never run."""
    prog = Program(cells=[dict(c) for c in release.setup])
    locked = {c["label"] for c in release.setup} | {g.id for g in release.grade_cells}
    found: dict[str, int] = {}
    student = []
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        meta, code = nbgrader_meta(cell), source(cell)
        gid = meta.get("grade_id")
        if gid in locked or not code.strip():
            continue
        if gid in release.solutions and gid not in found:
            found[gid] = i
            student.append({"label": gid, "source": code})
            continue
        if gid in release.solutions:
            prog.notes.append(f"A second cell with the id {gid!r} (cell {i + 1}) is treated as an ordinary cell.")
        owner = next((s for s, fns in release.solutions.items() if s not in found and fns
                      and set(fns) <= set(defined_functions(code))), None)
        if owner:
            found[owner] = i
            prog.notes.append(f"Cell {i + 1} lost its nbgrader metadata; it is graded as the answer "
                              f"{owner!r} because it defines {', '.join(release.solutions[owner])}.")
            student.append({"label": owner, "source": code})
        else:
            student.append({"label": f"cell {i + 1}", "source": code})
    prog.missing = [s for s in release.solutions if s not in found]
    prog.cells += student
    prog.notes += tampering(release, nb)
    return prog


def tampering(release: Release, nb: dict) -> list[str]:
    """Notes on read-only and test cells the student deleted, edited or added (the release's own are
    used whatever the notebook holds; these notes flag the student for the instructor)."""
    given = {nbgrader_meta(c)["grade_id"]: source(c).strip() for c in release.cells
             if nbgrader_meta(c).get("locked") or nbgrader_meta(c).get("grade")}
    by_source = {text: gid for gid, text in given.items()}  # a cell that lost its metadata, unchanged
    seen, edited, extra = set(), [], []
    for cell in nb["cells"]:
        meta, text = nbgrader_meta(cell), source(cell).strip()
        gid = meta.get("grade_id") or by_source.get(text)
        if gid in given and gid not in seen:
            seen.add(gid)
            if text != given[gid]:
                edited.append(gid)
        elif meta.get("grade") or gid in given:
            extra.append(str(gid)[:60])
    deleted = sorted({g.id for g in release.grade_cells} - seen)
    notes = []
    for what, ids in (("Test cells deleted", deleted), ("Read-only cells edited", edited),
                      ("Extra or repeated test cells", extra)):
        if ids:
            notes.append(f"{what} (the release's own are used): {', '.join(ids[:10])}.")
    return notes
