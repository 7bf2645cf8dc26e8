"""The fork servers' handles in the grading process: starting a server, sending it a job, stopping it.

The server itself is forkserver.py (a warm interpreter that forks every sandbox); sandbox.py keeps one
handle per kind of job (sandbox.SERVERS: numpy only, or numpy and torch) and sends each job's request
through it with the job's three descriptors. A server that died is started again, once.
"""
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent


class ForkServer:
    """forkserver.py, started on first use by a thread that lives as long as it does (the server's
    parent-death signal follows the thread that started it); stopped at exit (sandbox.stop_servers).
    ``students``: (the first student uid, how many), ``env``: the server's environment."""

    def __init__(self, students: tuple[int, int], env: dict[str, str], *modules: str):
        self.students, self.env = students, env
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
                [sys.executable, "-I", str(HERE / "forkserver.py"), str(theirs.fileno()), *map(str, self.students),
                 *self.modules],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=self.env,
                start_new_session=True, preexec_fn=die_with_parent)
            theirs.close()
            started.set()
            self.proc.wait()

        threading.Thread(target=keep, name="mha-forkserver", daemon=True).start()
        started.wait()
        self.control, self.owner = ours, os.getpid()


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when the grader dies (then --kill-child ends the namespace)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
