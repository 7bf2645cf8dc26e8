"""What the instructor reads in the terminal while a class is graded and after (issue 31, items 9, 10, 12, 13):

* the command printed to resume a stopped run is the one typed (``make grade ...`` under make), runs as printed
  in a shell with no virtual environment active, and grades exactly what the stopped run did not, a --force
  run included;
* the progress bar keeps ticking while endless loops hold every sandbox, and names them;
* the summary fits an 80-column terminal (nothing wraps, no line holds only a "."), and nothing is cut in a
  pipe or a log file;
* functions left unwritten are counted apart from the named mistakes, which are sorted by how many made them;
  a notebook that does not compile is labelled so.

The end-to-end tests run `make grade` as an instructor does, in a pseudo-terminal, as root (the sandbox)."""
import csv
import fcntl
import io
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from mha_grader.trusted import judging, notebooks, report, resume
from submissions import kit
from submissions.mutants import MUTANTS

ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|\([A-Z0-9])")


def screen_lines(raw: bytes) -> list[str]:
    """Every line or in-place redraw a terminal showed, escape sequences (and the terminal's echo of ctrl-C)
    removed."""
    parts = [ANSI.sub("", s).replace("^C", "") for s in re.split(r"[\r\n]", raw.decode(errors="replace"))]
    return [s for s in parts if s.strip()]


def in_terminal(command: list[str], cwd: Path, env: dict, until=None, then_ctrl_c: float | None = None,
                timeout: float = 600) -> tuple[int, bytes]:
    """Run ``command`` as the foreground job of an 80 x 24 pseudo-terminal; ``until(output so far)``: once true,
    wait ``then_ctrl_c`` seconds more and type ctrl-C. Returns (exit status, everything the terminal got)."""
    main, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

    def controlling_terminal():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=terminal, stdout=terminal, stderr=terminal,
                            start_new_session=True, preexec_fn=controlling_terminal)
    os.close(terminal)
    output = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                return
            if not chunk:
                return
            output.extend(chunk)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    try:
        if until is not None:
            while not until(bytes(output)):
                assert proc.poll() is None, f"ended before the condition:\n{output.decode(errors='replace')[-3000:]}"
                assert time.monotonic() < deadline, output.decode(errors="replace")[-3000:]
                time.sleep(0.2)
            time.sleep(then_ctrl_c or 0)
            os.write(main, b"\x03")  # ctrl-C: SIGINT to the terminal's foreground process group
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=10)
        os.close(main)
    return proc.returncode, bytes(output)


# --- the resume hint, composed ---------------------------------------------------------------------

def test_the_resume_hint_is_the_make_command_typed(monkeypatch, tmp_path):
    repo = str(kit.REPO)
    monkeypatch.setenv(resume.MAKE, repo)
    monkeypatch.setenv(resume.MAKE_FROM, repo)
    typed = ["--course", repo, "grade", "--force", "--student", "s1"]
    assert resume.command(typed) == "make grade ARGS='--force --student s1'"
    assert resume.command(typed, force=False) == "make grade ARGS='--student s1'"
    assert resume.command(["--course", str(tmp_path), "grade"]) == f"make grade COURSE={tmp_path}"
    monkeypatch.setenv(resume.MAKE_FROM, str(tmp_path))  # make -C <repo> grade, typed elsewhere
    assert resume.command(["--course", repo, "grade"]) == f"make -C {repo} grade"


def test_the_resume_hint_outside_make_names_an_interpreter_that_exists(monkeypatch):
    monkeypatch.delenv(resume.MAKE, raising=False)
    hint = resume.command(["--course", "/c", "grade", "--force", "--workers", "2"], force=False)
    assert hint == f"{sys.executable} -m mha_grader --course /c grade --workers 2"
    monkeypatch.setattr(sys, "orig_argv", ["python-not-on-path", "-m", "mha_grader", "grade"])
    assert resume.command().startswith(f"{sys.executable} -m mha_grader grade")


# --- the progress bar ------------------------------------------------------------------------------

PROGRESS = """
import time
from mha_grader.trusted import report
start = time.monotonic()
bar = report.Progress(10, "2 worker(s)", running=lambda: [("z_slow_0/02_split_heads", start),
                                                          ("z_slow_1/02_split_heads", start + 0.5)])
for _ in range(3):
    bar.step()
time.sleep(9)  # two endless loops hold both sandboxes: no result comes
bar.done()
"""


def test_progress_keeps_ticking_and_names_what_runs_while_no_result_comes():
    """Nine seconds without a result: the elapsed time goes on and the endless loops are named, in 80 columns."""
    env = {**os.environ, "PYTHONPATH": str(kit.REPO)}
    status, raw = in_terminal([sys.executable, "-c", PROGRESS], kit.REPO, env, timeout=120)
    assert status == 0, raw.decode(errors="replace")
    lines = screen_lines(raw)
    waiting = [s for s in lines if "3/10" in s]
    clocks = {m.group(1) for s in waiting if (m := re.search(r"(\d+:\d\d)[ ;]", s))}
    assert len(clocks) >= 6, waiting  # ticking while the count stays at 3
    assert any("z_slow_0/02_split_heads" in s and "running" in s for s in waiting), waiting
    assert max(len(s) for s in lines) <= 80, max(lines, key=len)


# --- the summary ---------------------------------------------------------------------------------

LONG = "fuse_heads: heads interleaved (stacked on a new last axis, then reshaped) and a few more words"


def _summary(width):
    rows = report.mistake_table({(LONG, "01_project"): {"a"}, ("split_heads: not written yet", "02_split_heads"):
                                 {"a", "b", "c"}}, kit.NOTEBOOKS)
    return report.screen([3.0, 15.0, 12.0], 15, rows, [None] * 3, [], [], Path("class_report.html"), width=width,
                         unwritten=3)


def test_the_summary_is_not_cut_in_a_pipe_or_a_log_file(tmp_path):
    with open(tmp_path / "grading.log", "w") as log:
        assert report.screen_width(log) is None
    assert report.screen_width(io.StringIO()) is None
    shown = "\n".join(_summary(report.screen_width(io.StringIO())))
    assert f"{LONG} (01_project)" in shown and "…" not in shown
    assert all(len(line) <= 80 for line in _summary(80))


def test_unwritten_functions_are_not_mistakes_and_mistakes_go_by_count():
    """Blank notebooks (the release's NotImplementedError left in place) stay out of the named mistakes; the
    mistake most students made comes first whatever its name."""
    made = {("split_heads: not written yet", "02_split_heads"): {"b1", "b2", "b3", "b4"},
            ("project: not written yet", "01_project"): {"b1", "b2", "b3", "b4"},
            ("project: the bias was left out", "01_project"): {"m1"},
            ("split_heads: reshape without transpose", "02_split_heads"): {"m2", "m3", "m4"},
            ("merge_heads: a", "03_merge_heads"): {"m5", "m6"}}
    rows = report.mistake_table(made, kit.NOTEBOOKS)
    named = [r["mistake"] for r in rows if r["kind"] == report.MISTAKE]
    assert named == ["split_heads: reshape without transpose", "merge_heads: a", "project: the bias was left out"]
    assert {r["mistake"] for r in rows if r["kind"] == report.LEFT_UNWRITTEN} == \
        {"split_heads: not written yet", "project: not written yet"}
    lines = report.screen([0.0] * 4 + [14.0] * 6, 15, rows, [], [], [], Path("class_report.html"), unwritten=4)
    top = lines[lines.index(next(s for s in lines if s.startswith("Top mistakes"))):][:4]
    assert "4 student(s) left functions unwritten" in top[0], lines
    assert "reshape without transpose" in top[1] and "not written yet" not in "\n".join(lines)


def test_a_function_whose_cell_does_not_compile_is_labelled_by_its_cause():
    prog = notebooks.Program(cells=[], notes=[])
    syntax = [{"label": "split_heads", "type": "SyntaxError", "line": 1, "message": "'(' was never closed"}]
    assert judging._missing_label("split_heads", syntax, prog) == "split_heads: its cell does not compile (SyntaxError)"
    raised = [{"label": "setup", "type": "NameError", "line": 3, "message": "name 'np' is not defined"}]
    assert "raised NameError" in judging._missing_label("split_heads", raised, prog)
    assert judging._missing_label("split_heads", [], prog) == "split_heads: not defined (no function of that name)"


# --- end to end: `make grade` in a terminal, stopped, resumed as printed --------------------------

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")
SPINS = "def split_heads(x, num_heads):\n    while True:\n        pass\n"
INTERLEAVED = next(m for m in MUTANTS if m.student == "m04_fuse_interleaved")
LIMITS = "--workers 2 --test-seconds 12 --notebook-seconds 14"  # a spinning notebook: about 14 s


def shell_env(course: Path) -> dict:
    """A login shell's environment with no virtual environment active (the course's venv is not on PATH)."""
    venv = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv)
    return {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8", "PWD": str(kit.REPO),
            "MHA_GRADER_SECRET": str(course.parent / "secret")}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Graded once, quickly: two students right or nearly, two whose split_heads spins (their other notebooks
    were not handed in)."""
    course = kit.make_course(tmp_path_factory.mktemp("instructor") / "course")
    (course.parent / "secret").write_text("0123456789abcdef" * 4 + "\n")
    (course.parent / "secret").chmod(0o600)
    kit.submit(course, "a_right", {n: kit.filled(course, n) for n in kit.NOTEBOOKS})
    kit.submit(course, "b_interleaved", {n: kit.filled(course, n) for n in kit.NOTEBOOKS}
               | {INTERLEAVED.notebook: kit.mutant_notebook(course, INTERLEAVED)})
    for student in ("z_slow_0", "z_slow_1"):
        kit.submit(course, student, {"02_split_heads": kit.filled(course, "02_split_heads", {"split_heads": SPINS})})
    log = subprocess.run(["make", "--no-print-directory", "grade", f"COURSE={course}",
                          "ARGS=--workers 2 --test-seconds 2 --notebook-seconds 3"], cwd=kit.REPO,
                         env=shell_env(course), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=600)
    assert log.returncode == 0, log.stdout[-3000:]
    return course, log.stdout


def result_times(course: Path) -> dict[str, float]:
    return {str(p.relative_to(course)): p.stat().st_mtime for p in (course / "autograded").glob("*/mha/*.result.json")}


@root_only
def test_the_summary_in_a_log_file_is_whole_and_ends_with_no_stray_line(course):
    course, log = course
    with open(course / "mistakes.csv", encoding="utf-8") as fh:
        label = next(row["mistake"] for row in csv.DictReader(fh) if row["notebook"] == INTERLEAVED.notebook)
    assert f"  {label} ({INTERLEAVED.notebook})" in log, log[-2000:]  # whole, however long
    assert "Per notebook in this process" not in log  # the grader's own costs: only with --timing
    assert not [line for line in log.splitlines() if line.strip() == "."]


@root_only
def test_stopped_with_ctrl_c_the_printed_command_finishes_exactly_the_rest(course):
    """A --force run typed as `make grade ...` in an 80-column terminal, with no venv active: while both sandboxes
    spin, the bar ticks and names them; ctrl-C; the printed command, run as printed in the same shell, grades
    exactly what the stopped run did not (nothing it did again)."""
    course, _ = course
    typed = ["make", "--no-print-directory", "grade", f"COURSE={course}", f"ARGS=--force {LIMITS}"]
    status, raw = in_terminal(typed, kit.REPO, shell_env(course), until=lambda out: b"z_slow_" in out,
                              then_ctrl_c=3.0)  # a spinner named: three more seconds of it, then ctrl-C
    lines = screen_lines(raw)
    assert "Traceback" not in "\n".join(lines), lines[-30:]
    bars = [s for s in lines if s.startswith("grading ")]
    ticking = [s for s in bars if "z_slow_" in s]
    assert len({re.search(r", (\d+:\d\d)", s).group(1) for s in ticking}) >= 3, ticking  # elapsed goes on
    assert max(len(s) for s in bars) <= 80, max(bars, key=len)
    stop = next(s for s in lines if "Resume with:" in s)
    hint = stop.split("Resume with: ", 1)[1].strip()
    assert hint == f"make grade COURSE={course} ARGS='{LIMITS}'", stop
    done = int(re.search(r"graded and recorded (\d+) of (\d+)", stop).group(1))
    jobs = 4 * len(kit.NOTEBOOKS)
    assert 0 < done < jobs, stop
    before = result_times(course)

    status, raw = in_terminal(["bash", "-c", hint], kit.REPO, shell_env(course))  # typed in the same shell
    shown = screen_lines(raw)
    assert status == 0, "\n".join(shown[-30:])
    assert f"This run graded {jobs - done} notebook(s)." in shown, shown[-30:]
    summary = shown[next(i for i, s in enumerate(shown) if re.match(r"\d+ students; ", s)):
                    next(i for i, s in enumerate(shown) if s.startswith("Grading took")) + 1]
    assert max(len(s) for s in summary) <= 80 and "." not in [s.strip() for s in summary], summary
    after = result_times(course)
    kept = [p for p in before if after[p] == before[p]]
    assert len(kept) == done, "a notebook the stopped run had graded was graded again"
    assert all(len(kit.scores(course)[s]) == len(kit.NOTEBOOKS) for s in ("a_right", "z_slow_0"))
