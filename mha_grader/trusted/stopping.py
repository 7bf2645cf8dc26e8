"""How a grading run is stopped.

SIGINT (ctrl-C), SIGTERM and SIGHUP (the terminal that started it was closed) ask the run to stop.
A run started with SIGHUP ignored (``nohup``) keeps it ignored: it outlives its terminal, as asked;
either way its lines are in the course's log (runlog.py). :class:`Stop` is installed before the grader's
imports (which take seconds), so a stop is honoured from the first moment: while the run waits (for
imports, the probe, planning, results, the database, the Dask scheduler) it is raised at once as
:class:`Stopped`; anywhere else it is remembered and raised at the next safe point (``check``), so a
result is never half recorded. (The command that resumes a stopped run is resume.py's.)
"""
import signal
from contextlib import contextmanager


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM",
         signal.SIGHUP: "SIGHUP (its terminal was closed)"}


class Stopped(BaseException):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) arrived: raised only where the run waits, never mid-record."""


class Stop:
    """SIGINT, SIGTERM and SIGHUP (unless ignored) ask the run to stop. Raised as Stopped inside ``waiting()``,
    remembered elsewhere (``check()`` raises it at the next safe point); a second signal changes nothing."""

    def __init__(self):
        self.signal: int | None = None
        self.safe = False

    @contextmanager
    def installed(self):
        previous = {s: signal.signal(s, self._handle) for s in SIGNALS
                    if not (s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN)}  # (nohup)
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
        return NAMES.get(self.signal, "a signal")

    def status(self) -> int:
        """The exit status of a run this stop ended: 128 + the signal (130 ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
        return 128 + (self.signal or signal.SIGINT)
