"""Run one grading job in a sandbox and read back what it reports, as plain data.

The sandbox is walls/__init__.py's: its claims, and who builds each. This module is the grader's side
of one job: it takes a slot (the job's two uids: the student's code runs as 62464 + n, the job's pid 1,
the harness, as 62592 + n, n the slot), writes the job's folder (the program of inside/, the modules
it imports and job.json, which holds no inputs), sends the request to a fork server (servers.py,
forkserver.py), then reads the report channel until the job ends or its time is up, with caps on
what it reads, and hands over each case's inputs only when the job asks for them. The jobs running in
this process are known, so that a stop ends them.

Jobs are forked from one warm fork server per grading process (numpy, and torch once needed,
already imported), not started as fresh interpreters: a NumPy notebook costs a few hundredths of
a second, not the tenths an interpreter start and its imports take.
"""
import atexit
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mha_checks.calling import Layout

from . import servers

HERE = Path(__file__).resolve().parent
INSIDE = HERE.parent / "inside"  # the programs a job runs, copied into its /job
CALLING = HERE.parents[1] / "mha_checks" / "calling.py"
UID_BASE, SLOTS = 0xF400, 256  # the sandbox's uids: UID_BASE + n, n < SLOTS (62464 to 62719)
JOBS = SLOTS // 2  # jobs at once: job slot k runs the student's code as UID_BASE + k, its pid 1 as UID_BASE + JOBS + k
MAX_REPORT = 32 * 1024 * 1024  # bytes of records read back from one job
MAX_LINE = 8 * 1024 * 1024
HARNESS_FAILED = 70  # the job's exit status when its program raised (forkserver._exit_with)
ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
       "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


@dataclass(frozen=True)
class Limits:
    """A job's limits. Its time limits are the student's own time (inside/harness.py's Clock): CPU time of
    all the job's processes, and time its code spent waiting by itself; what the machine takes (a busy
    CPU, a pause) is not counted, and ``backstop`` times each limit in wall-clock time ends a job as the
    machine's (never the student's verdict: the judge says so, and the notebook is graded again)."""
    test_s: float = 10.0        # own time of one test (its cells and cases)
    test_cpu_s: float = None    # CPU seconds of one test (None: test_s)
    notebook_s: float = 60.0    # own time, and CPU seconds, of all the tests of one notebook
    memory: int = 4 << 30       # address space of each process, and memory of all the job's together
    processes: int = 64         # processes of the sandbox user, and of the job
    file_size: int = 16 << 20   # largest file it may write (in its /tmp)
    cpus: float = 1.0           # CPU time of the whole job per wall second (so a test: test_s CPU s at most)
    backstop: float = 10.0      # wall-clock limits: this many times the test's and the notebook's

    def __post_init__(self):
        if self.test_cpu_s is None:
            object.__setattr__(self, "test_cpu_s", self.test_s)

    def as_dict(self) -> dict:
        return {"test_s": self.test_s, "test_cpu_s": self.test_cpu_s, "notebook_s": self.notebook_s,
                "backstop": self.backstop}

    def wall_s(self) -> float:
        """The longest a job may take in wall-clock time: its notebook's backstop, a test started just before
        it, and 30 s for its start and end; past it, the grader ends the job (as the machine's)."""
        return self.backstop * (self.notebook_s + self.test_s) + 30


@dataclass
class Report:
    records: list = field(default_factory=list)  # the parsed JSON lines, in order
    returncode: int | None = None
    timed_out: bool = False
    garbage: int = 0                             # lines that were not JSON objects
    truncated: bool = False
    seconds: float = 0.0                         # from the job's start to its end (its report read)
    waited: float = 0.0                          # before it started: waiting for a turn (see taking_turns)
    stderr: str = ""
    usage: dict = field(default_factory=dict)    # the job's cgroup: caps in force, peak memory, OOM kills, CPU s


@dataclass(frozen=True)
class Hardening:
    """Each protection of the sandbox, on. Only the probe's mutation test turns one off, to show that
    the probe notices (tests/test_sandbox.py), and scripts/measure_syscalls.py the allowlist's default
    (its trace mode); grading always runs with all of them."""
    readonly_root: bool = True
    readonly_job: bool = True
    file_size_limit: bool = True
    distinct_uids: bool = True
    net_namespace: bool = True
    ipc_namespace: bool = True
    tmp_size: bool = True
    cgroup: bool = True
    keyring: bool = True
    seccomp: bool = True
    hide_host_paths: bool = True
    harness_uid: bool = True          # pid 1 under a uid of its own, not the student's
    syscall_allowlist: bool = True    # the filter refuses every call it does not admit (off: admits all)
    foreign_arch_kills: bool = True   # a call under another architecture's numbers kills the job
    socket_families: bool = True      # no socket of any family opens
    pid_1_rule: bool = True           # the filter refuses kill and tgkill aimed at pid 1 (or a process group)
    also_admit: tuple = ()            # (weakenings only) calls the filter admits whole besides its list
    argument_rules: tuple = ()        # (weakenings only) calls admitted whole in place of their argument forms


class SandboxUnavailable(RuntimeError):
    """Isolation does not work on this machine; the message says what failed."""


class Ended(RuntimeError):
    """The job was not started, or was killed, because grading is stopping (end_all)."""


_RUNNING: dict[int, tuple] = {}  # the jobs running in this process: id -> (how to end it, its run's stop or None)
_RUNNING_LOCK = threading.Lock()
_REFUSING = False
_THREAD = threading.local()  # .stopping: the stop of the run this thread grades for (see stopping_with);
                             # .turns: the semaphore its sandboxes take turns of (see taking_turns)


def end_all(refuse_new: bool = True, of: threading.Event | None = None) -> int:
    """End every job this process is running now (its namespace goes with it), or only those of the run
    whose stop is ``of`` (see stopping_with); with ``refuse_new``, every later run() raises Ended.
    Returns how many jobs were ended."""
    global _REFUSING
    with _RUNNING_LOCK:
        _REFUSING = _REFUSING or refuse_new
        enders = [end for end, stop in _RUNNING.values() if of is None or stop is of]
    for end in enders:
        end()
    return len(enders)


def accept_new() -> None:
    """Start sandboxes again after end_all(refuse_new=True) (a new run in the same process)."""
    global _REFUSING
    with _RUNNING_LOCK:
        _REFUSING = False


def stopping_with(stop: threading.Event):
    """While the block lasts, this thread's jobs belong to the run that stops when ``stop`` is set: from
    then on run() raises Ended here (a process that outlives runs, a Dask worker, refuses nothing else),
    and end_all(of=stop) ends the jobs started before. Set ``stop``, then call end_all: no job slips between."""
    return _this_thread("stopping", stop)


def taking_turns(turns: threading.Semaphore):
    """While the block lasts, each sandbox this thread runs holds one of ``turns`` (a semaphore of n: at most n
    sandboxes at a time among the threads that share it, however many they are)."""
    return _this_thread("turns", turns)


@contextlib.contextmanager
def _this_thread(name: str, value):
    """``_THREAD.<name>`` is ``value`` while the block lasts."""
    setattr(_THREAD, name, value)
    try:
        yield
    finally:
        delattr(_THREAD, name)


class _Running:
    """Registers a job as running (refused once end_all was called, or its run stopped) while the block lasts."""

    def __init__(self, end):
        self.end = end

    def __enter__(self):
        stop = getattr(_THREAD, "stopping", None)
        with _RUNNING_LOCK:
            if _REFUSING or (stop is not None and stop.is_set()):
                raise Ended("grading is stopping: no new sandbox is started")
            _RUNNING[id(self)] = (self.end, stop)

    def __exit__(self, *exc):
        with _RUNNING_LOCK:
            _RUNNING.pop(id(self), None)


@functools.cache
def python_prefixes() -> tuple[str, ...]:
    """The folders the interpreter and its packages live in (mounted read-only inside)."""
    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return tuple(sorted(p for p in paths if not p.startswith(("/usr", "/lib", "/bin"))))


@functools.cache
def prefix_paths() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each prefix with every path this interpreter knows it by (through a link, say): inside, the
    prefix is mounted at a neutral folder and each of these paths is a link to it."""
    names = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    return tuple((real, tuple(sorted({real} | {n for n in names if os.path.realpath(n) == real})))
                 for real in python_prefixes())


def slot_folder() -> Path:
    """Where the slot locks live: a folder only this user can write (never the shared /tmp)."""
    base = Path("/run") if os.geteuid() == 0 else Path(os.environ.get("XDG_RUNTIME_DIR") or Path.home() / ".cache")
    folder = base / "mha-grader-slots"
    try:
        folder.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(f"{folder} must be a folder of this user's that no one else can write "
                                 f"(owner uid {info.st_uid}, mode {stat.filemode(info.st_mode)}): remove it")
    return folder


def _slot():
    """A free slot number and its lock (held while the job runs), opened without following links."""
    folder = slot_folder()
    for n in range(JOBS):
        fd = os.open(folder / f"{n}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fh = os.fdopen(fd, "r+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return n, fh
        except BlockingIOError:
            fh.close()
    raise RuntimeError(f"all {JOBS} sandbox slots are busy")


def run(job: dict, limits: Limits = Limits(), unsafe: bool = False, program: str = "harness.py",
        hardening: Hardening = Hardening()) -> Report:
    """Run ``job`` (see inside/harness.py) in a sandbox and return what it wrote to its report channel.

    A case's inputs (its "specs") stay here: the job folder holds none, and the harness gets each
    case's only when it asks, just before that call (see :func:`_inputs_kept_outside`)."""
    seed = _seed(job)
    job, inputs = _inputs_kept_outside(job)
    job = {**job, "seed": seed, "limits": limits.as_dict(), "own_namespace": not unsafe}
    with tempfile.TemporaryDirectory(prefix="mha-job-") as tmp:
        job_dir = Path(tmp) / "job"
        job_dir.mkdir()
        mount_point = Path(tmp) / "root"
        mount_point.mkdir()
        asked = time.monotonic()
        with open(Path(tmp) / "stderr.txt", "w+b") as errors, getattr(_THREAD, "turns", contextlib.nullcontext()):
            waited = time.monotonic() - asked
            if unsafe:  # --unsafe-no-sandbox: the same program, no isolation at all (the job folder stands in for /job)
                _job_files(job_dir, program, {**job, "student": None})
                report = _run_unsafe([sys.executable, "-I", str(job_dir / program)], limits, errors, tmp, inputs)
            else:
                slot, lock = _slot()
                with lock:
                    request = _request(mount_point, job_dir, program, slot, limits, hardening)
                    _job_files(job_dir, program, {**job, "student": request["student"]})
                    report = _run_sandboxed(SERVERS[bool(job.get("torch"))], request, limits, errors, inputs)
            errors.seek(0)
            report.stderr = errors.read(4096).decode(errors="replace")
            report.waited = waited
        return report


def _job_files(job_dir: Path, program: str, job: dict) -> None:
    """The job folder: the program, the modules it imports, and job.json; readable by the sandbox's users."""
    for name in (INSIDE / program, CALLING, INSIDE / "as_student.py", INSIDE / "student.py", INSIDE / "clock.py"):
        shutil.copy(name, job_dir / name.name)
    (job_dir / "job.json").write_text(json.dumps(job))
    for path in (job_dir.parent, job_dir, *job_dir.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)


def _seed(job: dict) -> int:
    """The seed of the job's random generators (Python's, NumPy's, torch's), drawn from the job itself:
    its cells and its cases with their hidden inputs. A submission graded again gets the same numbers,
    and the same feedback; another submission, or other inputs, other numbers."""
    content = json.dumps([job.get("cells"), job.get("tests")], sort_keys=True).encode()
    return int.from_bytes(hashlib.blake2b(content, digest_size=8).digest(), "big") >> 1  # (below 2**63)


def _request(root: Path, job_dir: Path, program: str, slot: int, limits: Limits, strong: Hardening) -> dict:
    """What the fork server needs to start the job (forkserver.manage). "uid": pid 1's, "student": the
    uid its children take to run student code (None: they keep pid 1's; a rootless sandbox has one uid)."""
    rlimits = {"RLIMIT_AS": limits.memory, "RLIMIT_NPROC": limits.processes, "RLIMIT_CORE": 0}
    if strong.file_size_limit:
        rlimits["RLIMIT_FSIZE"] = limits.file_size
    n = slot if strong.distinct_uids else 0
    student = UID_BASE + n if os.geteuid() == 0 else None
    harness = UID_BASE + JOBS + n if student is not None and strong.harness_uid else student
    return {"root": str(root), "job": str(job_dir), "prefixes": prefix_paths(), "program": f"/job/{program}",
            "uid": harness, "student": student if student != harness else None,
            "limits": rlimits, "hardening": dataclasses.asdict(strong), "cpu_count": program == "harness.py",
            "caps": {"memory": limits.memory, "processes": limits.processes, "cpus": limits.cpus}}


def _inputs_kept_outside(job: dict):
    """(the job without its cases' inputs, the answer to the harness's ``{"ask": [t, i]}``).

    The answer is test t's case i's inputs, each case once and in order, so that the sandbox never
    holds the inputs of a call before that call is made, nor another notebook's. The job gets
    ``shared_bytes``: room for the largest case's arrays in the harness's shared memory."""
    if "tests" not in job:
        return job, None
    specs = [[case.get("specs", []) for case in test["cases"]] for test in job["tests"]]
    tests = [{**test, "cases": [{k: v for k, v in case.items() if k != "specs"} for case in test["cases"]]}
             for test in job["tests"]]
    last = [(-1, -1)]

    def answer(record: dict) -> bytes:
        ask = record.get("ask")
        if isinstance(ask, list) and len(ask) == 2 and all(type(n) is int for n in ask) and tuple(ask) > last[0] \
                and 0 <= ask[0] < len(specs) and 0 <= ask[1] < len(specs[ask[0]]):
            last[0] = tuple(ask)
            return json.dumps({"specs": specs[ask[0]][ask[1]]}).encode()
        return b'{"specs": null}'
    room = max((Layout.size(s) for cases in specs for s in cases), default=0)
    return {**job, "tests": tests, "shared_bytes": room}, answer


def _run_sandboxed(server: servers.ForkServer, request: dict, limits: Limits, errors, inputs) -> Report:
    """The job through the fork server; its exit status comes back on a connection of its own,
    whose closing (here, on a timeout or when the grader dies) kills the job."""
    read_end, write_end = _channel()
    ours, theirs = socket.socketpair()
    with ours, _Running(lambda: _hang_up(ours)):
        try:
            server.send(request, [theirs.fileno(), write_end, errors.fileno()])
        finally:
            os.close(write_end)
            theirs.close()
        report = _collect(read_end, limits.wall_s(), inputs)
        if not (report.timed_out or report.truncated):  # else: closing ours ends the job
            ours.settimeout(10)
            try:
                ending = json.loads(ours.recv(4096) or b"{}")
                report.returncode, report.usage = ending.get("status"), ending.get("usage") or {}
            except (OSError, ValueError, AttributeError):
                pass
    return report


def _hang_up(connection: socket.socket) -> None:
    """The job's manager kills the job when its connection closes."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed: the job has ended


def _run_unsafe(cmd: list[str], limits: Limits, errors, cwd: str, inputs) -> Report:
    started: list[subprocess.Popen] = []
    with _Running(lambda: [_kill_group(p.pid) for p in started]):
        read_end, write_end = _channel()
        proc = subprocess.Popen([*cmd, str(write_end)], pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors, cwd=cwd, env=ENV, start_new_session=True,
                                preexec_fn=servers.die_with_parent)
        started.append(proc)
        os.close(write_end)
        try:
            report = _collect(read_end, limits.wall_s(), inputs)
        finally:
            if proc.poll() is None:
                proc.kill()
            returncode = proc.wait()
    report.returncode = returncode
    return report


def _kill_group(pid: int) -> None:
    """The unsafe job and every process it started (its own session: no namespace ends them)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _channel() -> tuple[int, int]:
    """The report channel: (our end, the job's end) of a stream socket pair."""
    ours, theirs = socket.socketpair()
    return ours.detach(), theirs.detach()


def _collect(channel: int, timeout: float, inputs=None) -> Report:
    """JSON lines from ``channel`` until every writer has closed it or time is up (then closed);
    each ``{"ask": ...}`` answered with ``inputs(record)``. What the job sent is read before time is
    found up: a grader that was itself paused (a stopped Dask worker) reads the report the job left."""
    report, start = Report(), time.monotonic()
    buffer, total, pending = b"", 0, b""
    os.set_blocking(channel, False)
    try:
        while True:
            left = timeout - (time.monotonic() - start)
            readable, writable, _ = select.select([channel], [channel] if pending else [], [], max(left, 0))
            if not (readable or writable) and left <= 0:
                report.timed_out = True
                break
            if writable:
                try:
                    pending = pending[os.write(channel, pending[:1 << 16]):]
                except BlockingIOError:
                    pass
                except OSError:
                    pending = b""  # the job is gone; what it sent is still read
            if not readable:
                continue
            try:
                chunk = os.read(channel, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_REPORT:
                report.truncated = True
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > MAX_LINE:
                buffer, report.truncated = b"", True
            for line in lines:
                record = _parse(line)
                if record is None:
                    report.garbage += 1
                elif set(record) == {"ask"}:  # answered, not kept
                    pending += (inputs(record) if inputs else b"{}") + b"\n"
                else:
                    report.records.append(record)
    finally:
        os.close(channel)
    report.seconds = time.monotonic() - start
    return report


SERVERS = {False: servers.ForkServer((UID_BASE, JOBS), ENV),  # by "does the job need torch?"
           True: servers.ForkServer((UID_BASE, JOBS), ENV, "torch")}


def start_servers() -> None:
    """Both servers, started before the first job (a Dask worker, as it starts)."""
    for server in SERVERS.values():
        server.start()


@atexit.register
def stop_servers() -> None:
    for server in SERVERS.values():
        try:
            server.stop()
        except OSError:
            pass  # already gone; the other still stops


def _parse(line: bytes) -> dict | None:
    """A line as a JSON object, or None."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None
