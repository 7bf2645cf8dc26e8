"""grades.csv after a run (``grade --export``, which `make grade` gives): nbgrader's own `nbgrader export`.

It runs as the instructor would run it, in the course folder with this interpreter, so that the course's
nbgrader_config.py chooses the gradebook and the exporter; it writes into grades.csv.partial, which
replaces grades.csv only once whole (an export that fails leaves the last grades.csv as it was). It is a
process of its own (its own session: ctrl-C in the terminal is for the run, which ends it). What it
prints is kept, not shown: when it fails, :func:`export` gives one clause saying why (the gradebook is
locked by another program, nbgrader's error, or its exit status), never its traceback.
"""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from .text import for_terminal

NAME = "grades.csv"
ERROR = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit)): (?:\([\w.]+\) )?(.+)$")  # a traceback's last line


def export(course: Path, stop) -> str:
    """Write grades.csv with `nbgrader export`; "" once written, else why not (a clause). ``stop`` (stopping.Stop)
    is honoured while it runs: the export is ended, and Stopped raised."""
    partial = Path(course) / f"{NAME}.partial"
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])  # (nbgrader runs `alembic`)
    proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "export", f"--to={partial}"], cwd=course,
                            env={**os.environ, "PATH": path}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with stop.waiting():
            said, _ = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        partial.unlink(missing_ok=True)
        raise
    if proc.returncode == 0 and partial.is_file():
        os.replace(partial, Path(course) / NAME)
        return ""
    partial.unlink(missing_ok=True)
    return why(said.decode("utf-8", "replace"), proc.returncode)


def why(said: str, status: int) -> str:
    """Why `nbgrader export` failed, from what it printed (its last error line) and its exit status."""
    errors = [found for line in said.splitlines() if (found := ERROR.match(line.strip()))]
    if not errors:
        return f"nbgrader export ended with exit status {status} and no error message"
    kind, message = errors[-1].groups()
    if "database is locked" in message:
        return ("the gradebook is locked: another program (formgrader, or another nbgrader command) is writing to "
                "it; wait until it is done")
    return f"nbgrader export failed ({for_terminal(kind, 60)}: {for_terminal(message.rstrip('.'), 300)})"
