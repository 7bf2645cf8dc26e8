"""One grading run at a time per course: a lock file in the course folder, held with flock(2).

The file (``.grading.lock``) says who holds it: process id, host, start time and command. The kernel
releases a flock when its process ends, however it ends, so a lock left by a dead run is simply
free: the next run takes it over (and says so). A second run while the first lives refuses, naming it.
"""
import fcntl
import json
import os
import socket
import time
from pathlib import Path

NAME = ".grading.lock"


class Held(RuntimeError):
    """Another run holds the course; the message says who."""


class CourseLock:
    def __init__(self, course: Path, command: str):
        self.path = Path(course) / NAME
        self.command = command
        self.handle = None
        self.previous: dict = {}  # what a stale lock said (a run that died)

    def __enter__(self) -> "CourseLock":
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(handle)
            handle.close()
            raise Held(f"Another grading run holds this course ({self.path}): {describe(holder)}. Wait for it "
                       "to finish, or stop it (ctrl-C in its terminal), then run this command again.") from None
        self.previous = _read(handle)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                                 "command": self.command}))
        handle.flush()
        self.handle = handle
        return self

    def stale_note(self) -> str:
        """A sentence about the dead run whose lock this one took over ("" when there was none)."""
        return f"Took over the lock of a grading run that ended without releasing it ({describe(self.previous)})." \
            if self.previous else ""

    def __exit__(self, *exc) -> None:
        self.handle.seek(0)
        self.handle.truncate()  # an empty file: nobody holds the course
        self.handle.close()


def _read(handle) -> dict:
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def describe(holder: dict) -> str:
    if not holder:
        return "a run that has not yet written its name"
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder.get("started", 0))))
    return (f"process {holder.get('pid')} on {holder.get('host')}, started {started}: "
            f"{str(holder.get('command', ''))[:200]}")
