"""The course secret: the hidden inputs are drawn from it at grading time.

The repository is public (solutions and checks included); what a student cannot know is the
secret, kept by the instructor outside the repository (default ~/.config/mha-grader/secret,
or the file named by $MHA_GRADER_SECRET). `python -m mha_grader secret` creates it: one line of
DIGITS hexadecimal digits (32 random bytes), mode 600. :func:`load` accepts that and nothing else
(a link to such a file is followed), and says in one sentence what it found instead: nothing, a
folder, a link to nothing, something that is not a file, a file it cannot read, an empty file, or
another size or format. It never prints what the file holds. Which secret graded a notebook is
recorded as its :func:`fingerprint` (jobs.py), never as the secret.
"""
import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path

import numpy as np

ENV = "MHA_GRADER_SECRET"
DIGITS = 64  # hexadecimal digits of a secret (secrets.token_hex(32))
EXPECTED = f"one line of {DIGITS} hexadecimal digits (what `make secret` writes)"
HEX = re.compile(rb"[0-9a-fA-F]{%d}" % DIGITS)
MAX_READ = 4096  # bytes read of the file at most: a secret is 65


class NoSecret(RuntimeError):
    """No usable secret; the message says what was expected, what was found and what to do (no final stop:
    the caller adds how to run again)."""


def path() -> Path:
    return Path(os.environ.get(ENV) or Path.home() / ".config" / "mha-grader" / "secret").expanduser()


def create(force: bool = False) -> Path:
    """Write a new random secret (mode 600); refuses to replace one unless ``force``, and never writes
    through a link or over anything but a regular file."""
    target = path()
    if os.path.islink(target) or (os.path.lexists(target) and not target.is_file()):
        raise NoSecret(f"{_named(target)} is {_kind(target)}, not the secret's file: name a file that does not "
                       f"exist yet (it is created), or remove what is there")
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists: keep it (grades depend on it), or pass --force to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(DIGITS // 2) + "\n")
    except OSError as err:
        raise NoSecret(f"The course secret could not be written at {target} ({err.strerror or err}): give "
                       f"${ENV} a file in a folder you can write") from None
    return target


def load() -> bytes:
    """The secret's bytes (its hexadecimal digits as text), or NoSecret saying what is wrong."""
    target = path()
    held = _read(target)
    text = held.strip()
    if not HEX.fullmatch(text):
        raise NoSecret(f"{_named(target)} is not a course secret: it holds {_described(held)}, not {EXPECTED}. "
                       f"{_remedy()}")
    return text


def _read(target: Path) -> bytes:
    """The first MAX_READ + 1 bytes of the secret's file (a link followed), or NoSecret: it is missing, a
    link to nothing, a folder, not a regular file (a FIFO is never waited on), or unreadable."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.path.islink(target):
            raise NoSecret(f"{_named(target)} is a link to {os.readlink(target)}, which does not exist. "
                           f"{_remedy()}") from None
        raise NoSecret(f"No course secret at {target}. The hidden test inputs are drawn from it; create it once "
                       f"with `make secret` (or `python -m mha_grader secret`) and keep it out of the repository "
                       f"(set ${ENV} to use another file)") from None
    except OSError as err:
        why = {errno.ELOOP: "a link that leads back to itself", errno.ENOTDIR: "a path through a file, not a folder",
               errno.EACCES: "not readable by this user"}.get(err.errno, f"unreadable ({err.strerror or err})")
        raise NoSecret(f"{_named(target)} is {why}. {_remedy()}") from None
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise NoSecret(f"{_named(target)} is {_kind(target)}, not a file: it must name the file that holds the "
                           f"secret, {EXPECTED}. {_remedy()}")
        return os.read(fd, MAX_READ + 1)
    except OSError as err:
        raise NoSecret(f"{_named(target)} could not be read ({err.strerror or err}). {_remedy()}") from None
    finally:
        os.close(fd)


def _named(target: Path) -> str:
    """The secret's path, and where it came from."""
    return f"${ENV} ({target})" if os.environ.get(ENV) else f"The course secret's file {target}"


def _kind(target: Path) -> str:
    """What ``target`` is, in words (links followed, except one to nothing)."""
    if os.path.islink(target) and not target.exists():
        return "a link to nothing"
    mode = target.stat().st_mode if target.exists() else 0
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a link" if os.path.islink(target)
            else "a file" if stat.S_ISREG(mode) else "not a file")


def _described(held: bytes) -> str:
    """What a file holds, without a word of it: its size, and whether it is text, of one line, hexadecimal."""
    if len(held) > MAX_READ:
        return f"more than {MAX_READ} bytes"
    text = held.strip()
    if not text:
        return "nothing" if not held else "only blank space"
    if any(b >= 127 or b < 32 and b not in b"\t\n\r" for b in text):
        return f"{len(held)} bytes that are not plain text"
    lines = len(text.splitlines())
    if lines > 1:
        return f"{lines} lines"
    digits = sum(chr(b) in "0123456789abcdefABCDEF" for b in text)
    return (f"{len(text)} hexadecimal digits" if digits == len(text)
            else f"{len(text)} characters, {len(text) - digits} of them not hexadecimal digits")


def _remedy() -> str:
    return (f"Point ${ENV} at the file of the secret that graded this class; only if none did yet, create one with "
            f"`make secret` (or `python -m mha_grader secret`)")


def fingerprint(key: bytes) -> str:
    """A short public name of the secret (which one graded what), revealing nothing of it."""
    return hmac.new(key, b"fingerprint", hashlib.sha256).hexdigest()[:12]


def rng(key: bytes, *names: str) -> np.random.Generator:
    """The random generator named by ``names``, unknowable without the key. The grader names one per
    grade cell AND submission (assignment, notebook, grade cell, student, sha256 of the notebook's
    bytes): each student's every submission gets its own hidden inputs, so a leaked draw is worth
    nothing, and the same submission is always graded on the same ones. Every draw holds every
    property the cell tests (:mod:`mha_checks.hidden`)."""
    return generator(seed(key, *names))


def seed(key: bytes, *names: str) -> int:
    """The seed of :func:`rng`'s generator (256 bits): what a job carries instead of the key, so that its hidden
    inputs are drawn where it is graded (jobs.draw) and nothing there can draw another submission's."""
    return int.from_bytes(hmac.new(key, "/".join(names).encode(), hashlib.sha256).digest(), "big")


def generator(seed: int) -> np.random.Generator:
    """The generator of a seed made by :func:`seed`."""
    return np.random.default_rng(seed)
