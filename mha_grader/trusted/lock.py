"""One grading run at a time per course: flock(2) on the course folder itself, and a note that says who
holds it.

The lock is taken on the folder's own inode, never on a file inside it: a file can be unlinked while
it is held, and a second run would then create a new one and lock that (two runs grading at once). A
folder that holds a course cannot be unlinked, and renaming it, or reaching it by another path or a
link, leaves the same inode, hence the same lock. The kernel releases a flock when its process ends,
however it ends, so the lock of a run that died is simply free: the next run takes it over (and says
so, from the note the dead run left).

The note, ``.grading.lock`` (mode 600, never followed if it is a link), holds the process id, host,
start time and the command (its passwords masked). It only names the holder: deleting it frees
nothing. Writing it is the run's first write to the course folder, so a folder that cannot be written
(read-only, disk full) is reported here, in one sentence, before anything else is done.
"""
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

NAME = ".grading.lock"


class Held(RuntimeError):
    """Another run holds the course; the message says who."""


class Unwritable(RuntimeError):
    """The course folder cannot be written (read-only, full, not ours); the message says why in one sentence."""


class CourseLock:
    def __init__(self, course: Path, command: str):
        self.course = Path(course)
        self.path = self.course / NAME
        self.command = command
        self.folder = self.note = None  # file descriptors while held
        self.previous: dict = {}  # what a stale note said (a run that died)

    def __enter__(self) -> "CourseLock":
        folder = os.open(self.course, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(folder)
            raise Held(f"Another grading run holds this course ({self.course}): {describe(_read(self.path))}. Wait "
                       "for it to finish, or stop it (ctrl-C in its terminal), then run this command again.") from None
        try:
            self.previous = _read(self.path)
            self.note = self._write_note()
        except OSError as err:
            os.close(folder)
            raise Unwritable(unwritable(self.course, err)) from None
        self.folder = folder
        return self

    def _write_note(self) -> int:
        """Write who holds the course into the note (created private, made private if it was not)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                                     "command": self.command}).encode())
        except OSError:
            os.close(fd)
            raise
        return fd

    def stale_note(self) -> str:
        """A sentence about the dead run whose lock this one took over ("" when there was none)."""
        return f"Took over the lock of a grading run that ended without releasing it ({describe(self.previous)})." \
            if self.previous else ""

    def __exit__(self, *exc) -> None:
        try:
            os.ftruncate(self.note, 0)  # an empty note: nobody holds the course (a note put in its place stays)
        except OSError:
            pass
        os.close(self.note)
        os.close(self.folder)  # the lock goes with it


def unwritable(course: Path, err: OSError) -> str:
    """Why nothing can be written into the course folder, and what to do, as one sentence."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"The disk that holds the course folder {course} is full: grading writes the gradebook, feedback/ "
                "and autograded/ there. Free some space on it")
    return (f"The course folder {course} cannot be written ({err.strerror or err}): grading writes the gradebook, "
            "feedback/ and autograded/ there. Make it writable for this user (a read-only mount or copy will not do)")


def _read(path: Path) -> dict:
    """What a note says (empty: no note, an empty one, or one that is not ours to read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            holder = json.loads(fh.read(65536) or b"{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def describe(holder: dict) -> str:
    if not holder:
        return "a run whose note (.grading.lock) is missing, empty or was deleted"
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder.get("started", 0))))
    except (TypeError, ValueError, OverflowError):  # (a note not written by a run: nothing in it is trusted)
        started = "at an unknown time"
    return (f"process {holder.get('pid', '(unknown)')} on {holder.get('host', 'an unknown host')}, started {started}: "
            f"{str(holder.get('command', '(command unknown)'))[:200]}")
