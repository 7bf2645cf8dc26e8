"""The course secret: the hidden inputs are drawn from it at grading time.

The repository is public (solutions and checks included); what a student cannot know is the
secret, kept by the instructor outside the repository (default ~/.config/mha-grader/secret,
or the file named by $MHA_GRADER_SECRET). `python -m mha_grader secret` creates it.
"""
import hashlib
import hmac
import os
import secrets
from pathlib import Path

import numpy as np

ENV = "MHA_GRADER_SECRET"


class NoSecret(RuntimeError):
    pass


def path() -> Path:
    return Path(os.environ.get(ENV) or Path.home() / ".config" / "mha-grader" / "secret").expanduser()


def create(force: bool = False) -> Path:
    """Write a new random secret (mode 600); refuses to replace one unless ``force``."""
    target = path()
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists: keep it (grades depend on it), or pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return target


def load() -> bytes:
    target = path()
    try:
        text = target.read_text().strip()
    except FileNotFoundError:
        raise NoSecret(f"No course secret at {target}. The hidden test inputs are drawn from it; create it "
                       f"once with `make secret` (or `python -m mha_grader secret`) and keep it out of the "
                       f"repository (set ${ENV} to use another file).") from None
    if len(text) < 32:
        raise NoSecret(f"The course secret in {target} is too short ({len(text)} characters); "
                       f"create a new one with `python -m mha_grader secret --force`.")
    return text.encode()


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
