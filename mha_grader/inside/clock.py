"""The time a test may take, read by the job's pid 1 (harness.py) from facts the student's code cannot change.

A test's limits are the student's own time: the CPU time of the job's processes (the job cgroup's count,
which covers every process the job starts, ended ones too) and the time its code spent waiting by itself
(sleeping, blocked on a read, stopped by its own doing). The machine's time is not the student's: what a
busy CPU keeps a task waiting in the run queue (the kernel's /proc/PID/task/TID/schedstat), and what a
pause takes from the job (pid 1 wakes later than it asked: the job, or the whole machine, was stopped). A
wall-clock backstop, well above the limits, ends a test the machine held back; the judge, outside, reads
the seconds a test reports and never makes such a stop the student's verdict (trusted/judging.py).

Contest judges do the same with other means: isolate's keeper reads its box's cgroup CPU time and holds
a separate wall-clock limit, and reports which one was hit; CMS gives the wall clock 2x + 1 s the CPU
limit. They count a busy machine's time against the program; here it is not counted.

Copied into /job next to harness.py and imported by file (``import clock``), as student.py is; the fork
server has it loaded already. It reads, and never writes, what the kernel says: it decides nothing.
"""
import os
import select
import time

CHECK_S = 0.25  # the longest pid 1 waits on the student's code before it looks at the time again
SETTLE_S = CHECK_S  # a test starts (and ends) with a look when more than this passed since the last


class Clock:
    """The job's time as the student's code spends it, read by this process (pid 1: the student's
    processes can neither signal it nor change what it reads):

    cpu   CPU seconds of every process of the job but this one: the job cgroup's count, held open since
          before pid 1 gave up its privileges (walls/cgroups.py; it counts ended processes too), less pid
          1's own; without a cgroup (the unsafe mode), what /proc says of the student's processes;
    own   the seconds that passed while the student's code ran or waited by itself (its cells, its calls,
          this process reading what they send), less the time spent waiting for the grader (asking for
          inputs, sending records) and the time the machine took from the job: the longest run-queue wait
          of any of its tasks since the last look (/proc/PID/task/TID/schedstat: runnable but not running,
          as on a busy machine) or this process's own lateness (a wait that ended later than asked: the
          job was paused), whichever is larger. Code that sleeps, blocks on a read or stops itself spends
          its own time; code that the machine kept from a CPU does not.

    The lateness counts at once; the run-queue waits and the CPU time when it looks (a read of the count
    and of each task's schedstat): at most every CHECK_S while a test runs (a quick test pays none), and
    as a test starts after more than SETTLE_S since the last look (each test is charged for its own)."""

    def __init__(self, count: int | None, own_namespace: bool):
        self.count, self.own_namespace = count, own_namespace
        self.child = None         # (the unsafe mode) the student's process whose tasks are looked at
        self.born = time.monotonic()
        self.excluded = 0.0       # seconds spent waiting for the grader: no one's
        self.lost = 0.0           # seconds the machine took
        self.late = 0.0           # this process's lateness since the last look (counted in lost already)
        self.looked = (self.born, 0.0)  # (when, gross()) at the last look
        self.delays: dict = {}    # task -> its run-queue wait (ns) at the last look
        self.cpu_seen = self.cpu()

    def gross(self, now: float) -> float:
        """Seconds since the job began, but those spent waiting for the grader."""
        return now - self.born - self.excluded

    def own(self) -> float:
        return self.gross(time.monotonic()) - self.lost

    def select(self, readable: list, writable: list, seconds: float) -> tuple[list, list]:
        """select(2) for at most ``seconds``; its lateness is the machine's, and the clock looks every CHECK_S."""
        start = time.monotonic()
        ready, ready_w, _ = select.select(readable, writable, [], seconds)
        now = time.monotonic()
        late = max(0.0, now - start - seconds)
        self.late, self.lost = self.late + late, self.lost + late
        if now - self.looked[0] >= CHECK_S:
            self.look(now)
        return ready, ready_w

    def for_the_grader(self, since: float) -> None:
        """The time from ``since`` to now went to waiting for the grader (its answer, its reading): no one's."""
        self.excluded += time.monotonic() - since

    def look(self, now: float | None = None) -> None:
        """Count the time the machine took since the last look (the longest run-queue wait beyond the lateness
        counted already); read the CPU time anew."""
        now = time.monotonic() if now is None else now
        delays = self._delays()
        worst = max((d - self.delays.get(task, 0) for task, d in delays.items()), default=0) / 1e9
        span = self.gross(now) - self.looked[1]
        self.lost += max(0.0, min(span, worst) - self.late)
        self.delays, self.late, self.looked = delays, 0.0, (now, self.gross(now))
        self.cpu_seen = self.cpu()

    def settle(self) -> None:
        """Look, if more than SETTLE_S passed since the last look: what the machine took then is charged to the
        test that ran then (a quick test costs no look)."""
        now = time.monotonic()
        if self.gross(now) - self.looked[1] > SETTLE_S:
            self.look(now)

    def cpu(self) -> float:
        """CPU seconds of the job's processes but this one, so far."""
        if self.count is None:
            return self._cpu_from_proc()
        return counted(self.count) - time.process_time()

    def _processes(self, this_one: bool) -> list[str]:
        """The /proc entries of the job's processes: every process of the namespace (or, in the unsafe mode, the
        child alone), this one among them if ``this_one``."""
        if not self.own_namespace:
            return ([str(self.child)] if self.child else []) + ([str(os.getpid())] if this_one else [])
        return [name for name in os.listdir("/proc") if name.isdigit() and (this_one or name != "1")]

    def _delays(self) -> dict:
        """{task: its run-queue wait in ns} of every task of the job (this process's too: starved, it reads late)."""
        found = {}
        for pid in self._processes(this_one=True):
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                        found[tid] = int(fh.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue  # it has just ended
        return found

    def _cpu_from_proc(self) -> float:
        """Without a cgroup: the ended children's CPU (as os.times counts it) and the living student processes'
        (with what they reaped)."""
        ended = os.times()
        total = ended.children_user + ended.children_system
        for pid in self._processes(this_one=False):
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
            except (OSError, ValueError):
                continue
        return total


class Mark:
    """The clock's readings at one moment: (wall, cpu, own)."""

    def __init__(self, clock: Clock, fresh: bool = True):
        self.wall, self.cpu, self.own = time.monotonic(), clock.cpu() if fresh else clock.cpu_seen, clock.own()

    def since(self, start: "Mark") -> tuple[float, float, float]:
        return self.wall - start.wall, self.cpu - start.cpu, self.own - start.own


class Budget:
    """One test's time: limits' ``test_s`` of own time and ``test_cpu_s`` of CPU time, each within what is left
    of the notebook's ``notebook_s``, and a wall-clock backstop of ``backstop`` times the test's seconds, past
    which the time is the machine's, not the student's (the judge, outside, says so from the facts).

    left()   how long pid 1 may wait before it looks again (0: the time is up);
    stop()   (status, detail) of a test stopped for its time: "timeout" (the test's own limit: detail, its
             seconds), "spent" (the notebook's: its seconds), "wall" (the backstop: its seconds);
    facts()  what was spent, for the report: the test's cpu, own and wall seconds, the notebook's cpu and own."""

    def __init__(self, clock: Clock, notebook: Mark, limits: dict):
        self.clock, self.notebook, self.limits = clock, notebook, limits
        clock.settle()
        self.start = Mark(clock)
        _, cpu_before, own_before = self.start.since(notebook)
        self.own = min(limits["test_s"], limits["notebook_s"] - own_before)
        self.cpu = min(limits["test_cpu_s"], limits["notebook_s"] - cpu_before)
        self.wall = limits["backstop"] * limits["test_s"]

    def spent_before(self) -> bool:
        """The notebook's time was spent before this test began."""
        return min(self.own, self.cpu) <= 0

    def left(self) -> float:
        left = self._left()
        if left <= 0:  # (up, by the readings so far: looked at anew before it is said)
            self.clock.look()
            left = self._left()
        return left

    def _left(self) -> float:
        wall, cpu, own = Mark(self.clock, fresh=False).since(self.start)
        return max(0.0, min(self.own - own, self.cpu - cpu, self.wall - wall))

    def stop(self) -> tuple[str, float]:
        wall, cpu, own = Mark(self.clock).since(self.start)
        if own < self.own and cpu < self.cpu:
            return "wall", self.wall
        by_the_notebook = (own >= self.own and self.own < self.limits["test_s"]) \
            or (cpu >= self.cpu and self.cpu < self.limits["test_cpu_s"])
        return ("spent", self.limits["notebook_s"]) if by_the_notebook else ("timeout", self.limits["test_s"])

    def facts(self) -> dict:
        self.clock.settle()
        now = Mark(self.clock)
        wall, cpu, own = now.since(self.start)
        _, notebook_cpu, notebook_own = now.since(self.notebook)
        return {name: round(value, 3) for name, value in (("cpu", cpu), ("own", own), ("wall", wall),
                                                          ("notebook_cpu", notebook_cpu), ("notebook_own", notebook_own))}


def counted(count: int) -> float:
    """The CPU seconds a cgroup's count says, read anew from its open file: cgroup v1's cpuacct.usage (one
    number, nanoseconds) or cgroup v2's cpu.stat (its usage_usec line, microseconds)."""
    os.lseek(count, 0, os.SEEK_SET)
    text = os.read(count, 4096).decode()
    if " " not in text.strip():
        return int(text) / 1e9
    return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("usage_usec ")) / 1e6
