"""The run's log: every line a grading run prints, also appended to ``grading.log`` in the course folder.

A large class takes a while, and the terminal that started it may close (SIGHUP: stopping.py) or be
gone when the run ends: its last lines (the summary, or the sentence that says why it stopped and the
command that resumes) are then in the log. Each run starts with a header line (when, which process,
the command, passwords masked); then come the lines of stdout and stderr as they are printed, except
the progress bar's redraws (a carriage return marks them). The file is private (mode 600), appended
to, never followed if it is a link.

A terminal that went away does not end the run: a write to it that fails (EIO once it is hung up,
EPIPE) sends that stream to /dev/null from then on, so that nothing else, the interpreter's last
flush included, fails on it; the log goes on. A log that cannot be written (a full disk) is given up
on, silently: the run's own sentences say what went wrong with the disk.
"""
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

NAME = "grading.log"


@contextmanager
def installed(course: Path, command: str):
    """Tee stdout and stderr into the course's log while the block runs (without a log if it cannot be opened)."""
    try:
        fd = os.open(Path(course) / NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        yield None
        return
    log = _Log(fd)
    log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, process {os.getpid()}: {command}\n")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(sys.stdout, log), _Tee(sys.stderr, log)
    try:
        yield log
    finally:
        for tee in (sys.stdout, sys.stderr):
            tee.flush()
        sys.stdout, sys.stderr = saved
        log.close()


class _Log:
    def __init__(self, fd: int):
        self.fd = fd

    def write(self, text: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:  # (a full disk: the run says so itself)
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Tee:
    """A text stream that writes to ``stream`` (until writing to it fails) and, but for redraws, to ``log``."""

    def __init__(self, stream, log: _Log):
        self.stream, self.log, self.redrawn = stream, log, False

    def write(self, text: str) -> int:
        self._to_stream(lambda: self.stream.write(text))
        if not text:
            return 0
        redraw = "\r" in text
        if not redraw and not (self.redrawn and text == "\n"):  # (a bar's closing newline is a redraw's too)
            self.log.write(text)
        self.redrawn = redraw
        return len(text)

    def flush(self) -> None:
        self._to_stream(self.stream.flush)

    def _to_stream(self, act) -> None:
        try:
            act()
        except OSError:  # the terminal is gone (EIO) or the pipe closed (EPIPE): /dev/null from now on
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self.stream.fileno())
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass

    def __getattr__(self, name):  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)
