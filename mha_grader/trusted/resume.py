"""The command that resumes a stopped run: the one the instructor typed, runnable again as printed.

Under ``make grade`` it is ``make grade`` with the ``COURSE=`` and ``ARGS=`` that were given (and
``-C <folder>`` unless make was started in the repository), not the interpreter make ran: the
Makefile says so in two variables of the environment, MHA_GRADER_MAKE (the folder make ran in) and
MHA_GRADER_MAKE_FROM (the folder it was started from). Otherwise it is the interpreter and its
arguments as typed, the interpreter by its full path when the word typed would not find this one.

Once a ``--force`` run has marked its notebooks as not graded (run.py), its command leaves
``--force`` out: rerun as printed, it grades exactly what the stopped run did not, nothing twice.

A password in it (``scheme://user:password@host``, a database URL given with --db-url) is shown as ***,
with a word on where the password goes instead: the command is printed and kept in the course's lock note.
"""
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

MAKE, MAKE_FROM = "MHA_GRADER_MAKE", "MHA_GRADER_MAKE_FROM"
MADE_OPTIONS = ("--export",)  # what `make grade` puts before the instructor's ARGS (the Makefile's recipe)
FORCE = "--force"
PASSWORD = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^\s:/@'\"]*:)[^\s@'\"]+(?=@)")  # scheme://user:PASSWORD@


def command(argv: list[str] | None = None, force: bool = True, add: tuple[str, ...] = ()) -> str:
    """The command that started this run (``argv``: the arguments after ``python -m mha_grader``; None:
    this process's own), without --force unless ``force``, with the options ``add`` (unless typed), its
    passwords masked."""
    typed = _typed(argv, force, add)
    shown = hide_passwords(typed)
    return shown if shown == typed else (shown + "  (the database password is not shown: give it in ~/.pgpass, "
                                         "or the whole URL in MHA_GRADER_DB_URL, rather than on the command line)")


def hide_passwords(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:password@host``) shown as ***."""
    return PASSWORD.sub(r"\g<head>***", text)


def _typed(argv: list[str] | None, force: bool, add: tuple[str, ...] = ()) -> str:
    words = list(sys.orig_argv) if argv is None else [sys.executable, "-m", "mha_grader", *argv]
    if "grade" not in words:
        return shlex.join(words)
    split = words.index("grade")
    options = [w for w in words[split + 1:] if force or w != FORCE]
    options += [w for w in add if w not in options]
    return _as_make(words[:split], options) or shlex.join([_interpreter(words[0]), *words[1:split + 1], *options])


def _as_make(before: list[str], options: list[str]) -> str:
    """``make grade ...`` when `make grade` started this process, else "". (The Makefile gives the grader
    MADE_OPTIONS itself: they are not the instructor's ARGS.)"""
    folder = os.environ.get(MAKE)
    if not folder:
        return ""
    options = options[len(MADE_OPTIONS):] if options[:len(MADE_OPTIONS)] == list(MADE_OPTIONS) else options
    started = os.environ.get(MAKE_FROM, "")
    where = "" if started and _same(started, folder) else f" -C {shlex.quote(folder)}"
    course = _course_of(before)
    return (f"make{where} grade" + ("" if _same(course, folder) else f" COURSE={shlex.quote(course)}")
            + (f" ARGS={shlex.quote(shlex.join(options))}" if options else ""))


def _interpreter(word: str) -> str:
    """``word`` when typing it finds this interpreter, else this interpreter's full path."""
    found = shutil.which(word)
    return word if found and Path(found).absolute() == Path(sys.executable).absolute() else sys.executable


def _same(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _course_of(words: list[str]) -> str:
    """The --course given before the sub-command (the default: here)."""
    for i, word in enumerate(words):
        if word == "--course" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--course="):
            return word.split("=", 1)[1]
    return "."
