"""nbgrader's collect files, read as data: ``timestamp.txt`` (when the work was handed in) and
``submission_secret.txt`` (what names the student's released feedback).

Who writes them: ``nbgrader submit`` writes both into the student's submission in the exchange, in the
student's own process, and ``nbgrader collect`` copies them into submitted/<student>/<assignment>/;
``nbgrader zip_collect`` writes timestamp.txt from the LMS file names. So a student can write anything
into them (nbgrader's default exchange vouches for neither), and nbgrader autograde trusts timestamp.txt
all the same: it is the only record of when work was handed in. The grader trusts it as autograde does
(the same parser, nbgrader.utils.parse_utc, so the same time), and reads both files as untrusted data:
a regular file (never a link, a folder or a pipe), a few bytes at most, printable ASCII, and a timestamp
in the closed grammar below before nbgrader's parser sees it. That grammar matters: parse_utc hands the
third word of a timestamp to dateutil's gettz, which opens an absolute path as a time zone file, as root
here (``2026-01-01 00:00:00 /proc/kmsg`` would block the run); only a zone name or a numeric offset gets there.

A timestamp.txt that is not usable (too long, not text, outside the grammar, a link, unparseable) keeps
its student from being graded, with the reason in the run's notes, as autograde stops on it; an empty
one counts as none (autograde warns and records no time). Neither file is ever reported as something
handed in besides the notebooks.

Feedback that ``nbgrader release_feedback`` can release (:func:`publish`): generate_feedback copies
both files beside the pages, and release_feedback names each released page by a hash of the secret and
the notebook, and stops on the first student folder without them. The grader writes them beside a
student's pages (and into autograded/, which generate_feedback reads) once every notebook of the
submission they came with is graded, so a student fetches the pages of that submission. A submission
that has a timestamp.txt but no usable secret gets a fresh random one that no student holds: its pages
are released under a name nobody can ask for, and the release goes on for the rest of the class.
"""
import datetime
import errno
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

TIMESTAMP, SECRET = "timestamp.txt", "submission_secret.txt"
NAMES = (TIMESTAMP, SECRET)
MAX_TIMESTAMP = 100  # bytes: nbgrader writes ~30 ("2026-11-28 13:00:00.123456 UTC")
MAX_SECRET = 1024    # bytes: nbgrader writes 128 hex digits
SECRET_TEXT = re.compile(rb"[!-~]{1,%d}\n?" % MAX_SECRET)  # printable ASCII, no space (read back by release_feedback)
TIMESTAMP_TEXT = re.compile(r"[0-9A-Za-z:.,+\-_/ ]+")  # the characters a timestamp may hold at all
ZONE = re.compile(r"[+-]?[0-9]{1,4}|[+-]?[0-9]{1,2}:[0-9]{2}"  # parse_utc's third word, which goes to gettz: an
                  r"|[A-Za-z][A-Za-z0-9_+\-:]{0,40}(?:/[A-Za-z0-9_+\-]{1,40}){0,3}")  # offset or a name, never a path


@dataclass(frozen=True)
class Timestamp:
    """A submission's timestamp.txt: ``at`` (naive UTC, as nbgrader stores it) or None (no file, or empty);
    ``problem`` says why the file is not usable (then its student is not graded); ``raw`` its bytes."""
    at: datetime.datetime | None = None
    problem: str = ""
    raw: bytes | None = None


def read_small(path: Path, cap: int) -> bytes | str:
    """The bytes of a regular file of at most ``cap`` bytes, or why not (a link is never followed, a
    pipe never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        return "is a link" if err.errno == errno.ELOOP else f"cannot be read ({err.strerror})"  # (O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "is not a regular file"
        raw = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    return raw if len(raw) <= cap else f"holds more than {cap} bytes"


def read_timestamp(folder: Path) -> Timestamp:
    """The timestamp.txt of a submission folder (no file: Timestamp())."""
    path = folder / TIMESTAMP
    if not os.path.lexists(path):
        return Timestamp()
    raw = read_small(path, MAX_TIMESTAMP)
    if isinstance(raw, str):
        return Timestamp(problem=f"its {TIMESTAMP} {raw}")
    try:
        return Timestamp(parse(raw.decode("ascii").strip()), raw=raw)
    except (UnicodeDecodeError, ValueError) as err:
        return Timestamp(problem=f"its {TIMESTAMP} is not a time nbgrader can read ({err})", raw=raw)


def parse(text: str) -> datetime.datetime | None:
    """A timestamp as nbgrader autograde reads it (CourseDirectory.get_existing_timestamp: stripped; empty is
    none; nbgrader.utils.parse_utc, naive UTC), admitted only within the grammar above (ValueError)."""
    from nbgrader.utils import parse_utc  # (the grader's trusted side has nbgrader loaded already)
    if not text:
        return None
    words = text.split(" ")
    if not TIMESTAMP_TEXT.fullmatch(text) or (len(words) == 3 and not ZONE.fullmatch(words[2])):
        raise ValueError("characters or a time zone outside what nbgrader writes")
    try:
        return parse_utc(text)
    except Exception as err:  # noqa: BLE001 - dateutil's parser on untrusted text: any failure is "unreadable"
        raise ValueError(f"{type(err).__name__}") from None


def secret_of(folder: Path) -> bytes | None:
    """A submission's submission_secret.txt as it may be copied (None: none, or not usable)."""
    raw = read_small(folder / SECRET, MAX_SECRET + 1)
    return raw if isinstance(raw, bytes) and SECRET_TEXT.fullmatch(raw) else None


def publish(submitted: Path, timestamp: Timestamp, targets: list[Path]) -> str:
    """Write the submission's collect files into each of ``targets`` that exists (its feedback folder, then its
    autograded one), where the submission came with any (a submission copied in by hand has none, and gets
    none, as after generate_feedback); only what differs is written. Returns a note, or ""."""
    targets = [folder for folder in targets if folder.is_dir()]
    if not targets or (timestamp.raw is None and not os.path.lexists(submitted / SECRET)):
        return ""
    secret = secret_of(submitted)
    for folder in targets:
        _replace(folder / TIMESTAMP, timestamp.raw or b"")
        _replace(folder / SECRET, secret or _kept_random(targets[0]))
    if secret or not os.path.lexists(submitted / SECRET):  # (an LMS download comes with no secret: nothing to say)
        return ""
    return (f"{submitted.parent.name}: its {SECRET} is not usable (not a small text file): its pages are released "
            "under a secret no student holds, and nbgrader release_feedback goes on for the class")


def _kept_random(folder: Path) -> bytes:
    """A secret of the grader's own for a submission without a usable one: the one written before, else new."""
    before = read_small(folder / SECRET, MAX_SECRET + 1)
    if isinstance(before, bytes) and before.startswith(b"mha-"):
        return before
    return b"mha-" + secrets.token_hex(64).encode()


def _replace(path: Path, raw: bytes) -> None:
    """``path`` holds ``raw`` (replaced whole, mode 644 as generate_feedback leaves it), unless it already does."""
    if read_small(path, len(raw)) == raw:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.write_bytes(raw)
    tmp.chmod(0o644)
    os.replace(tmp, path)
