"""Run one grading job in a sandbox and read back what it reports, as plain data.

The sandbox (forkserver.py): fresh mount, PID, network, IPC and UTS namespaces; a file system
holding only the Python installation and the job folder, read-only, and a 64 MB /tmp; an
unprivileged user of its own (a distinct uid per concurrent job, so that one job's process limit
cannot starve another), no capabilities, no new privileges; limits on address space, processes
and file size. The network namespace has only a loopback device, down. When the job ends, or its
time is up, or the grader dies, its PID namespace goes and with it every process it started.

Jobs are forked from one warm fork server per grading process (numpy, and torch once needed,
already imported), not started as fresh interpreters: a NumPy notebook costs a few hundredths of
a second, not the tenths an interpreter start and its imports take.

Run as root, the student's code runs as uid 61000+n. Run as an ordinary user, it runs in a new
user namespace as that user (who owns nothing the sandbox can see). :func:`probe` checks all of
this on the machine at hand before any grading.
"""
import atexit
import ctypes
import fcntl
import functools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLING = HERE.parent / "mha_checks" / "calling.py"
UID_BASE, SLOTS = 61000, 256
MAX_REPORT = 32 * 1024 * 1024  # bytes of records read back from one job
MAX_LINE = 8 * 1024 * 1024
ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
       "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


@dataclass(frozen=True)
class Limits:
    test_s: float = 10.0        # wall time of one test (its cells and cases)
    test_cpu_s: int = 10        # CPU seconds of one test
    notebook_s: float = 60.0    # wall time of all the tests of one notebook
    memory: int = 4 << 30       # address space of each process
    processes: int = 64         # processes of the sandbox user
    file_size: int = 16 << 20   # largest file it may write (in its /tmp)

    def as_dict(self) -> dict:
        return {"test_s": self.test_s, "test_cpu_s": self.test_cpu_s, "notebook_s": self.notebook_s}


@dataclass
class Report:
    records: list = field(default_factory=list)  # the parsed JSON lines, in order
    returncode: int | None = None
    timed_out: bool = False
    garbage: int = 0                             # lines that were not JSON objects
    truncated: bool = False
    seconds: float = 0.0
    stderr: str = ""


class SandboxUnavailable(RuntimeError):
    """Isolation does not work on this machine; the message says what failed."""


class Ended(RuntimeError):
    """The job was not started, or was killed, because grading is stopping (end_all)."""


_RUNNING: dict[int, object] = {}  # the jobs running in this process: id -> how to end it (a callable)
_RUNNING_LOCK = threading.Lock()
_REFUSING = False


def end_all(refuse_new: bool = True) -> int:
    """End every job this process is running now (its namespace goes with it); with ``refuse_new``,
    every later run() raises Ended. Returns how many jobs were ended."""
    global _REFUSING
    with _RUNNING_LOCK:
        _REFUSING = _REFUSING or refuse_new
        enders = list(_RUNNING.values())
    for end in enders:
        end()
    return len(enders)


def accept_new() -> None:
    """Start sandboxes again after end_all(refuse_new=True) (a new run in the same process)."""
    global _REFUSING
    with _RUNNING_LOCK:
        _REFUSING = False


class _Running:
    """Registers a job as running (refused once end_all was called) while the block lasts."""

    def __init__(self, end):
        self.end = end

    def __enter__(self):
        with _RUNNING_LOCK:
            if _REFUSING:
                raise Ended("grading is stopping: no new sandbox is started")
            _RUNNING[id(self)] = self.end

    def __exit__(self, *exc):
        with _RUNNING_LOCK:
            _RUNNING.pop(id(self), None)


@functools.cache
def python_prefixes() -> tuple[str, ...]:
    """The folders the interpreter and its packages live in (mounted read-only inside)."""
    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return tuple(sorted(p for p in paths if not p.startswith(("/usr", "/lib", "/bin"))))


def _slot():
    """A free slot number and its lock (held while the job runs)."""
    folder = Path(tempfile.gettempdir()) / "mha-grader-slots"
    folder.mkdir(mode=0o700, exist_ok=True)
    for n in range(SLOTS):
        fh = open(folder / f"{n}.lock", "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return n, fh
        except BlockingIOError:
            fh.close()
    raise RuntimeError(f"all {SLOTS} sandbox slots are busy")


def run(job: dict, limits: Limits = Limits(), unsafe: bool = False, program: str = "harness.py") -> Report:
    """Run ``job`` (see harness.py) in a sandbox and return what it wrote to its report channel."""
    with tempfile.TemporaryDirectory(prefix="mha-job-") as tmp:
        job_dir = Path(tmp) / "job"
        job_dir.mkdir()
        shutil.copy(HERE / program, job_dir / program)
        shutil.copy(CALLING, job_dir / "calling.py")
        (job_dir / "job.json").write_text(json.dumps({**job, "limits": limits.as_dict(), "own_namespace": not unsafe}))
        mount_point = Path(tmp) / "root"
        mount_point.mkdir()
        for path in (Path(tmp), job_dir, *job_dir.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        with open(Path(tmp) / "stderr.txt", "w+b") as errors:
            if unsafe:  # --unsafe-no-sandbox: the same program, no isolation at all (the job folder stands in for /job)
                report = _run_unsafe([sys.executable, "-I", str(job_dir / program)], limits, errors, tmp)
            else:
                slot, lock = _slot()
                with lock:
                    request = {"root": str(mount_point), "job": str(job_dir), "prefixes": python_prefixes(),
                               "program": f"/job/{program}",
                               "uid": None if os.geteuid() != 0 else UID_BASE + slot,
                               "limits": {"RLIMIT_AS": limits.memory, "RLIMIT_NPROC": limits.processes,
                                          "RLIMIT_FSIZE": limits.file_size, "RLIMIT_CORE": 0}}
                    report = _run_sandboxed(SERVERS[bool(job.get("torch"))], request, limits, errors)
            errors.seek(0)
            report.stderr = errors.read(4096).decode(errors="replace")
        return report


def _run_sandboxed(server: "_ForkServer", request: dict, limits: Limits, errors) -> Report:
    """The job through the fork server; its exit status comes back on a connection of its own,
    whose closing (here, on a timeout or when the grader dies) kills the job."""
    read_end, write_end = os.pipe()
    ours, theirs = socket.socketpair()
    with ours, _Running(lambda: _hang_up(ours)):
        try:
            server.send(request, [theirs.fileno(), write_end, errors.fileno()])
        finally:
            os.close(write_end)
            theirs.close()
        report = _collect(read_end, limits.notebook_s + 30)
        if not (report.timed_out or report.truncated):  # else: closing ours ends the job
            ours.settimeout(10)
            try:
                report.returncode = json.loads(ours.recv(1024) or b"{}").get("status")
            except (OSError, ValueError):
                pass
    return report


def _hang_up(connection: socket.socket) -> None:
    """The job's manager kills the job when its connection closes."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed: the job has ended


def _run_unsafe(cmd: list[str], limits: Limits, errors, cwd: str) -> Report:
    started: list[subprocess.Popen] = []
    with _Running(lambda: [_kill_group(p.pid) for p in started]):
        read_end, write_end = os.pipe()
        proc = subprocess.Popen([*cmd, str(write_end)], pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors, cwd=cwd, env=ENV, start_new_session=True,
                                preexec_fn=_die_with_parent)
        started.append(proc)
        os.close(write_end)
        try:
            report = _collect(read_end, limits.notebook_s + 30)
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


def _collect(read_end: int, timeout: float) -> Report:
    """JSON lines from ``read_end`` until every writer has closed it or time is up (then closed)."""
    report, start = Report(), time.monotonic()
    buffer, total = b"", 0
    try:
        while True:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                report.timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 16)
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
                _parse(line, report)
    finally:
        os.close(read_end)
    report.seconds = time.monotonic() - start
    return report


class _ForkServer:
    """forkserver.py, started on first use by a thread that lives as long as it does (the server's
    parent-death signal follows the thread that started it); stopped at exit."""

    def __init__(self, *modules: str):
        self.modules = list(modules)  # what it imports beyond numpy
        self.lock = threading.Lock()
        self.control: socket.socket | None = None
        self.proc: subprocess.Popen | None = None
        self.owner = None

    def start(self) -> None:
        """Start it now, if it is not running in this process."""
        with self.lock:
            self._start_unless_running()

    def send(self, request: dict, fds: list[int]) -> None:
        with self.lock:
            for attempt in (1, 2):
                self._start_unless_running()
                try:
                    socket.send_fds(self.control, [json.dumps(request).encode()], fds)
                    return
                except OSError:  # the server died: start another, once
                    self.control = None
                    if attempt == 2:
                        raise

    def stop(self) -> None:
        """Close the server's socket: it waits for its last jobs' managers, then ends."""
        with self.lock:
            if self._running():
                self.control.close()
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            self.control = None

    def _running(self) -> bool:
        """Started by this process (a forked copy of the grader has none of its own yet)."""
        return self.control is not None and self.owner == os.getpid()

    def _start_unless_running(self) -> None:
        if self._running():
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = threading.Event()

        def keep():
            self.proc = subprocess.Popen(
                [sys.executable, "-I", str(HERE / "forkserver.py"), str(theirs.fileno()), *self.modules],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=ENV,
                start_new_session=True, preexec_fn=_die_with_parent)
            theirs.close()
            started.set()
            self.proc.wait()

        threading.Thread(target=keep, name="mha-forkserver", daemon=True).start()
        started.wait()
        self.control, self.owner = ours, os.getpid()


SERVERS = {False: _ForkServer(), True: _ForkServer("torch")}  # by "does the job need torch?"


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


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the grader dies (then --kill-child ends the namespace)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _parse(line: bytes, report: Report) -> None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        report.garbage += 1
        return
    if isinstance(record, dict):
        report.records.append(record)
    else:
        report.garbage += 1


def probe(private: list[str], readonly: list[str], unsafe: bool = False) -> list[str]:
    """Run probe.py in a sandbox: the list of what isolation fails to ensure (empty: all good).

    ``private``: paths student code must not read (course, gradebook, secret, home folders);
    ``readonly``: folders it must not write (the interpreter, the packages). A server listening
    on the host's loopback must be unreachable from inside.
    """
    import socket
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        job = {"private": private, "readonly": readonly, "port": server.getsockname()[1],
               "rootless": os.geteuid() != 0}
        try:
            report = run(job, Limits(notebook_s=20), unsafe=unsafe, program="probe.py")
        except (OSError, RuntimeError) as err:
            return [f"the sandbox could not start: {err}"]
    checks = [r for r in report.records if "check" in r]
    if not checks:
        return [f"the sandbox could not start (exit status {report.returncode}): {report.stderr.strip()[:800]}"]
    return [f"{r['check']}: failed ({r.get('detail', '')})" for r in checks if not r.get("ok")]
