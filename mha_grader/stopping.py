"""How a grading run is stopped, and the command that resumes it.

SIGINT (ctrl-C) and SIGTERM ask the run to stop. :class:`Stop` is installed before the grader's
imports (which take seconds), so a stop is honoured from the first moment: while the run waits (for
imports, the probe, planning, results, the database, the Dask scheduler) it is raised at once as
:class:`Stopped`; anywhere else it is remembered and raised at the next safe point (``check``), so a
result is never half recorded.

:func:`resume_command` is the command the instructor typed (``make grade ...`` or ``python -m
mha_grader ...``), runnable again as printed, with any password in it masked.
"""
import os
import re
import shlex
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

MAKE = "MHA_GRADER_MAKE"  # set by `make grade`: the folder make ran in (the grader rebuilds `make grade ...`)
PASSWORD = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^\s:/@'\"]*:)[^\s@'\"]+(?=@)")  # scheme://user:PASSWORD@


class Stopped(BaseException):
    """A stop signal (SIGINT, SIGTERM) arrived: raised only where the run waits, never mid-record."""


class Stop:
    """SIGINT and SIGTERM ask the run to stop. Raised as Stopped inside ``waiting()``, remembered
    elsewhere (``check()`` raises it at the next safe point); a second signal changes nothing."""

    def __init__(self):
        self.signal: int | None = None
        self.safe = False

    @contextmanager
    def installed(self):
        previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _handle(self, signum, frame) -> None:
        first, self.signal = self.signal is None, self.signal or signum
        if first and self.safe:
            self.safe = False
            raise Stopped()

    @contextmanager
    def waiting(self):
        self.check()
        outer, self.safe = self.safe, True
        try:
            yield
        finally:
            self.safe = outer and self.signal is None

    def check(self) -> None:
        if self.signal is not None:
            raise Stopped()

    def requested(self) -> bool:
        return self.signal is not None

    def name(self) -> str:
        return {signal.SIGINT: "ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}.get(self.signal, "a signal")

    def status(self) -> int:
        """The exit status of a run this stop ended: 128 + the signal (130 for ctrl-C, 143 for SIGTERM)."""
        return 128 + (self.signal or signal.SIGINT)


def hide_passwords(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:password@host``) shown as ***."""
    return PASSWORD.sub(r"\g<head>***", text)


def resume_command(argv: list[str] | None = None) -> str:
    """The command that started this run, as the instructor typed it and can type it again: ``make grade
    [COURSE=...] [ARGS=...]`` under make, else the interpreter and its arguments (``sys.orig_argv``);
    passwords masked, with a word on where the password goes then."""
    words = list(sys.orig_argv if argv is None else [sys.executable, "-m", "mha_grader", *argv])
    typed = _as_make(words) or shlex.join(words)
    shown = hide_passwords(typed)
    return shown if shown == typed else (shown + "  (the database password is not shown: give it in ~/.pgpass, "
                                         "or the whole URL in MHA_GRADER_DB_URL, rather than on the command line)")


def _as_make(words: list[str]) -> str:
    """``make grade ...`` when `make grade` started this process (it sets MAKE to the folder it ran in), else ""."""
    folder = os.environ.get(MAKE)
    if not folder or "grade" not in words:
        return ""
    course, options = _course_of(words[:words.index("grade")]), words[words.index("grade") + 1:]
    where = "" if Path(os.environ.get("PWD", "")).resolve() == Path(folder).resolve() else f" -C {shlex.quote(folder)}"
    return (f"make{where} grade" + ("" if Path(course).resolve() == Path(folder).resolve()
                                    else f" COURSE={shlex.quote(course)}")
            + (f" ARGS={shlex.quote(shlex.join(options))}" if options else ""))


def _course_of(words: list[str]) -> str:
    """The --course given before the sub-command (the default: here)."""
    for i, word in enumerate(words):
        if word == "--course" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--course="):
            return word.split("=", 1)[1]
    return "."
