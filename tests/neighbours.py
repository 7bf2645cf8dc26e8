"""Noisy neighbours for a test or a benchmark: busy processes started here and stopped here, by their ids.

Each neighbour is a session of its own (``setsid``) running ``processes`` busy processes, un-niced, as
another user's program would: another course's grading, a build, a backup. The kernel shares the CPU
between sessions and control groups (autogroup, CFS group scheduling), not between processes, so the
number of neighbours decides how much of a core a sandbox job (a control group of its own) gets, and
the number of processes the load average. ``Neighbours(8, 8)``: load average above 30 on 2 cores within a
minute, about a fifth of a core left to each job.

    with Neighbours(sessions=8, processes=8) as busy:
        busy.wait_for_load(30)
        ...                      # busy.load() says the lowest and highest load average seen meanwhile
"""
import os
import signal
import subprocess
import sys
import threading
import time

BUSY = "import os, sys\nfor _ in range(int(sys.argv[1]) - 1):\n    if os.fork() == 0:\n        break\nwhile True:\n    pass\n"


class Neighbours:
    def __init__(self, sessions: int = 8, processes: int = 8):
        self.sessions, self.processes = sessions, processes
        self.leaders: list[subprocess.Popen] = []
        self.seen: list[float] = []  # the 1-minute load average, each second from start to stop
        self.stopping = threading.Event()

    def __enter__(self) -> "Neighbours":
        for _ in range(self.sessions):
            self.leaders.append(subprocess.Popen([sys.executable, "-c", BUSY, str(self.processes)],
                                                 start_new_session=True, stdin=subprocess.DEVNULL))
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for leader in self.leaders:  # each session is one process group: its leader's id
            try:
                os.killpg(leader.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            leader.wait()
        self.sampler.join()

    def _sample(self) -> None:
        while not self.stopping.wait(1.0):
            self.seen.append(os.getloadavg()[0])

    def wait_for_load(self, load: float, timeout: float = 240) -> float:
        """Wait until the 1-minute load average reaches ``load`` (RuntimeError after ``timeout`` s); the seconds waited."""
        start = time.monotonic()
        while os.getloadavg()[0] < load:
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"the load average stayed below {load} for {timeout} s ({os.getloadavg()})")
            time.sleep(1)
        return time.monotonic() - start

    def mark(self) -> int:
        """A point in the samples: load(since=mark) covers what came after it."""
        return len(self.seen)

    def load(self, since: int = 0) -> tuple[float, float]:
        """(lowest, highest) 1-minute load average sampled since ``since`` (a mark)."""
        seen = self.seen[since:] or [os.getloadavg()[0]]
        return min(seen), max(seen)
