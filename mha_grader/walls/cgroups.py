"""A control group per sandbox job: its memory (all its processes together), its number of processes
and its CPU capped; its usage read back when it ends; the group removed after it.

cgroup v2 where the memory, pids and cpu controllers are in the unified tree; else cgroup v1's
memory, pids, cpu and cpuacct hierarchies (hosts where those are still v1, a "hybrid" layout).
A job's group is made below the grader's own group in each hierarchy (read from /proc/self/cgroup),
so whatever bounds the grader also bounds all its jobs together. Run as root (or with a delegated
cgroup v2 subtree); :class:`Unavailable` says what is missing otherwise.

The group's CPU count (:meth:`JobGroup.cpu_file`: v1's cpuacct.usage in nanoseconds, v2's cpu.stat
usage_usec) covers every process of the job, those that have ended too: the job's pid 1 holds it open
(opened before it gives up its privileges) and measures each test's CPU time with it
(inside/harness.py), as isolate's keeper reads its box's cpu.stat.
"""
import errno
import os
import time
from dataclasses import dataclass

V1 = ("memory", "pids", "cpu", "cpuacct")
V2 = ("memory", "pids", "cpu")
PERIOD_US = 100_000  # the CPU quota's accounting period
LEAF = "mha-grader"  # (v2) where the grader's processes go when its group must hand controllers down


class Unavailable(OSError):
    """No job groups here; the message says why and what to change."""


@dataclass(frozen=True)
class Caps:
    memory: int      # bytes, all the job's processes together (no swap beyond it)
    processes: int   # processes and threads alive at once
    cpus: float      # CPU time per wall second (1.0: one core)


def _mounts() -> dict[str, str]:
    """{"cgroup2": mount point, v1 controller: mount point} from /proc/self/mountinfo."""
    found = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            fstype, options = fields[fields.index("-") + 1], fields[-1].split(",")
            if fstype == "cgroup2":
                found.setdefault("cgroup2", fields[4])
            elif fstype == "cgroup":
                for name in options:
                    found.setdefault(name, fields[4])
    return found


def _own_groups() -> dict[str, str]:
    """{controller (v1) or "" (v2): this process's group path}."""
    groups = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                groups[name] = path
    return groups


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _field(path: str, key: str) -> int:
    """The number after ``key`` in a flat-keyed file (memory.events, cpu.stat, ...); 0 if absent."""
    try:
        for line in _read(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except OSError:
        pass
    return 0


def _number(path: str) -> int:
    try:
        text = _read(path)
    except OSError:
        return -1
    return -1 if text == "max" else int(text)


def layout() -> tuple[str, dict[str, str]]:
    """("v2", {"": own group folder}) or ("v1", {controller: own group folder}); else Unavailable."""
    mounts, own = _mounts(), _own_groups()
    if "cgroup2" in mounts and "" in own:
        folder = mounts["cgroup2"] + own[""].removesuffix(f"/{LEAF}")  # (see _delegate)
        try:
            controllers = set(_read(os.path.join(folder, "cgroup.controllers")).split())
        except OSError:
            controllers = set()
        if set(V2) <= controllers:
            return "v2", {"": folder}
    missing = [c for c in V1 if c not in mounts or c not in own]
    if not missing:
        return "v1", {c: mounts[c] + own[c] for c in V1}
    raise Unavailable(errno.ENOENT, "no cgroup with the memory, pids and cpu controllers for the grader "
                      f"(v2: not all enabled in its group; v1: {', '.join(missing)} not mounted): mount them "
                      "(cgroup v2 with memory, pids and cpu delegated to the grader, or the v1 hierarchies)")


class JobGroup:
    """One job's group in every hierarchy: :meth:`create`, then the job :meth:`join`s it from inside,
    then :meth:`usage` and :meth:`remove` once every process of the job has ended."""

    def __init__(self, name: str, caps: Caps):
        self.version, own = layout()
        self.caps = caps
        self.folders = {c: os.path.join(folder, name) for c, folder in own.items()}

    def create(self) -> "JobGroup":
        try:
            if self.version == "v2":
                self._create_v2()
            else:
                self._create_v1()
        except OSError as err:
            self.remove()
            raise Unavailable(err.errno, f"could not set up the job's cgroup ({err}); the grader must run as "
                              "root, or own a delegated cgroup v2 subtree") from err
        return self

    def _create_v2(self) -> None:
        folder = self.folders[""]
        _delegate(os.path.dirname(folder))
        os.mkdir(folder, 0o755)
        _write(os.path.join(folder, "memory.max"), str(self.caps.memory))
        if os.path.exists(os.path.join(folder, "memory.swap.max")):
            _write(os.path.join(folder, "memory.swap.max"), "0")
        _write(os.path.join(folder, "pids.max"), str(self.caps.processes))
        _write(os.path.join(folder, "cpu.max"), f"{round(self.caps.cpus * PERIOD_US)} {PERIOD_US}")

    def _create_v1(self) -> None:
        for folder in set(self.folders.values()):
            os.mkdir(folder, 0o755)
        memory, pids, cpu = self.folders["memory"], self.folders["pids"], self.folders["cpu"]
        _write(os.path.join(memory, "memory.limit_in_bytes"), str(self.caps.memory))
        if os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes")):
            _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), str(self.caps.memory))
        _write(os.path.join(pids, "pids.max"), str(self.caps.processes))
        _write(os.path.join(cpu, "cpu.cfs_period_us"), str(PERIOD_US))
        _write(os.path.join(cpu, "cpu.cfs_quota_us"), str(round(self.caps.cpus * PERIOD_US)))

    def cpu_file(self) -> str:
        """The file that counts the CPU time of the group's processes: one number of nanoseconds (v1), or
        lines of which ``usage_usec`` is that time in microseconds (v2)."""
        if self.version == "v2":
            return os.path.join(self.folders[""], "cpu.stat")
        return os.path.join(self.folders["cpuacct"], "cpuacct.usage")

    def join(self) -> None:
        """Move the calling process into the group (its children follow it)."""
        for folder in set(self.folders.values()):
            _write(os.path.join(folder, "cgroup.procs"), "0")

    def usage(self) -> dict:
        """What the kernel says the job's group was allowed and used (read before :meth:`remove`)."""
        if self.version == "v2":
            f = self.folders[""]
            return {"cgroup": "v2", "memory_max": _number(f"{f}/memory.max"),
                    "memory_peak": _number(f"{f}/memory.peak"), "oom_kills": _field(f"{f}/memory.events", "oom_kill"),
                    "pids_max": _number(f"{f}/pids.max"), "forks_refused": _field(f"{f}/pids.events", "max"),
                    "cpus": _cpus_v2(_read(f"{f}/cpu.max")), "cpu_s": _field(f"{f}/cpu.stat", "usage_usec") / 1e6,
                    "throttled": _field(f"{f}/cpu.stat", "nr_throttled")}
        m, p, c, a = (self.folders[k] for k in V1)
        quota = _number(f"{c}/cpu.cfs_quota_us")
        return {"cgroup": "v1", "memory_max": _number(f"{m}/memory.limit_in_bytes"),
                "memory_peak": _number(f"{m}/memory.max_usage_in_bytes"),
                "oom_kills": _field(f"{m}/memory.oom_control", "oom_kill"),
                "pids_max": _number(f"{p}/pids.max"), "forks_refused": _field(f"{p}/pids.events", "max"),
                "cpus": -1 if quota < 0 else quota / _number(f"{c}/cpu.cfs_period_us"),
                "cpu_s": _number(f"{a}/cpuacct.usage") / 1e9, "throttled": _field(f"{c}/cpu.stat", "nr_throttled")}

    def remove(self) -> bool:
        """Remove the group (retrying while the kernel finishes tearing the job down); True if gone."""
        gone = True
        for folder in set(self.folders.values()):
            for _ in range(1000):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY:
                        break
                    time.sleep(0.001)
            gone = gone and not os.path.exists(folder)
        return gone


def _delegate(own: str) -> None:
    """Let the grader's own v2 group hand memory, pids and cpu to job groups below it. cgroup v2
    allows that only to a group with no processes of its own: if enabling fails for that reason
    (EBUSY), the processes of the group (the grader's, in a delegated group) move first into a leaf
    child, :data:`LEAF`, still below it (and jobs are made beside that leaf). (Not exercised on this project's hybrid v1 machines.)"""
    control = os.path.join(own, "cgroup.subtree_control")
    if set(V2) <= set(_read(control).split()):
        return
    try:
        _write(control, " ".join(f"+{c}" for c in V2))
        return
    except OSError as err:
        if err.errno != errno.EBUSY:
            raise
    leaf = os.path.join(own, LEAF)
    os.makedirs(leaf, exist_ok=True)
    for pid in _read(os.path.join(own, "cgroup.procs")).split():
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid)
        except ProcessLookupError:
            pass  # (ended meanwhile)
    _write(control, " ".join(f"+{c}" for c in V2))


def _cpus_v2(text: str) -> float:
    quota, period = text.split()
    return -1 if quota == "max" else int(quota) / int(period)
