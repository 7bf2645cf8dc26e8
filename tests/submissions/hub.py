"""A shared machine as on JupyterHub, inside a test: real Unix students and nbgrader's own exchange.

:class:`Hub` (root only) makes a folder of its own under /tmp (readable by all: the students must reach
the exchange), the exchange in it (mode 777, as nbgrader's documentation sets it up) and one real Unix
user per student (``useradd``, a home under that folder, never elsewhere), and removes them all again.
:meth:`Hub.run_as` runs a command as one of them, as a hub runs their Jupyter: their uid and gid, no
other group, a clean environment with HOME their home, their own nbgrader configuration
(~/.jupyter/nbgrader_config.py: the course id and the exchange). nbgrader names a submission by the
login user (pwd.getpwuid(os.getuid())), so each student is a user of their own.

The students run the course's venv, whose interpreter may live in a folder they cannot enter (here a
pyenv in root's home, mode 700). Such a folder is covered, for the student's command alone, in a mount
namespace of its own: an empty tmpfs over it, holding only the interpreter's folder, bound back in place.
The real folder is neither read nor changed, and the student's processes cannot see what else it holds.
"""
import os
import pwd
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent


def _closed_ancestors(path: str) -> list[tuple[str, str]]:
    """(the outermost folder on the way to ``path`` that others cannot enter, ``path``), if there is one."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        folder = Path(*parts[:i + 1])
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return [(str(folder), path)]
    return []


def _mounts(stage: Path) -> list[str]:
    """Shell lines that, in a fresh mount namespace, make the interpreter's folders reachable by anyone."""
    needed = sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)})
    pairs = [pair for path in needed for pair in _closed_ancestors(path)]
    lines = []
    for i, (_, path) in enumerate(pairs):  # first kept aside, then the closed folder covered, then bound back
        lines += [f"mkdir -p {stage}/{i}", f"mount --bind {shlex.quote(path)} {stage}/{i}"]
    for closed in sorted({c for c, _ in pairs}):
        lines.append(f"mount -t tmpfs -o mode=755,size=1m mha-hub {shlex.quote(closed)}")
    for i, (_, path) in enumerate(pairs):
        lines += [f"mkdir -p {shlex.quote(path)}", f"mount --bind {stage}/{i} {shlex.quote(path)}"]
    return lines


class Hub:
    """Students ``names`` as Unix users (named ``<name>_<random>``: see :attr:`users`) and an exchange."""

    def __init__(self, names: list[str], course_id: str):
        self.course_id, self.tag = course_id, secrets.token_hex(3)
        self.root = Path(tempfile.mkdtemp(prefix="mha-hub-"))
        self.root.chmod(0o755)
        self.exchange = self.root / "exchange"
        self.exchange.mkdir(mode=0o777)
        self.exchange.chmod(0o777)
        self.stage = self.root / "stage"
        self.stage.mkdir(mode=0o700)
        self.users: dict[str, str] = {}  # name -> Unix user (the student id nbgrader sees)
        try:
            for name in names:
                self.add(name)
        except BaseException:
            self.close()
            raise

    def add(self, name: str) -> str:
        user = f"{name}_{self.tag}"
        home = self.root / "home" / user
        home.parent.mkdir(mode=0o755, exist_ok=True)
        subprocess.run(["useradd", "--home-dir", str(home), "--create-home", "--no-log-init", "--user-group",
                        "--shell", "/usr/sbin/nologin", user], check=True, capture_output=True)
        self.users[name] = user
        config = home / ".jupyter" / "nbgrader_config.py"
        config.parent.mkdir()
        config.write_text(f"c = get_config()\nc.CourseDirectory.course_id = {self.course_id!r}\n"
                          f"c.Exchange.root = {str(self.exchange)!r}\n")
        self.chown(home)
        return user

    def home(self, name: str) -> Path:
        return self.root / "home" / self.users[name]

    def chown(self, path: Path) -> None:
        """Give ``path`` (and all below it) to the user whose home holds it."""
        user = pwd.getpwnam(path.relative_to(self.root / "home").parts[0])
        for folder, _, files in os.walk(path):
            for p in [folder, *(os.path.join(folder, f) for f in files)]:
                os.chown(p, user.pw_uid, user.pw_gid)

    def run_as(self, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """``args`` run as student ``name`` in their home (stdout and stderr merged)."""
        user = pwd.getpwnam(self.users[name])
        env = {"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name, "LANG": "C.UTF-8",
               "PATH": f"{BIN}:/usr/bin:/bin"}
        command = shlex.join(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
                              "env", "-i", *(f"{k}={v}" for k, v in env.items()), *args])
        script = "\n".join([*_mounts(self.stage), f"cd {shlex.quote(user.pw_dir)}", f"exec {command}"])
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)

    def close(self) -> None:
        """Remove the users and everything under the hub's folder (nothing else was made)."""
        for user in self.users.values():
            subprocess.run(["userdel", user], capture_output=True)
        left = [u for u in self.users.values() if _exists(u)]
        shutil.rmtree(self.root, ignore_errors=True)
        assert not left, f"users not removed: {left}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False
