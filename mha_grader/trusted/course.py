"""The course on disk: release, submissions, what is already graded, and the gradebook.

Folders follow nbgrader's: exercises/<assignment>/ (the release), submitted/<student>/<assignment>/,
autograded/<student>/<assignment>/, feedback/<student>/<assignment>/. The gradebook is nbgrader's
(sqlite by default, any SQLAlchemy URL such as PostgreSQL), written only by this process.

A notebook counts as graded when its grades are committed and a stamp holds the key of what was
graded (the notebook's bytes, the release, the secret's fingerprint and the grader's version) and
the status of the file those bytes were read from (jobs.py). A run that is killed leaves every
committed grade; the next run grades exactly what is missing or changed (a re-submitted notebook
is a file of another status, and has new bytes, hence a new key).
"""
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import collected, notebooks

GRADER_VERSION = "1"
MAX_ENTRIES = 1_000  # entries of one student's folder that are listed
MAX_RENAMED = 10     # other .ipynb files of one student read to find a renamed notebook
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}")  # matched whole (fullmatch)


@dataclass
class Job:
    student: str
    notebook: str
    path: Path | None      # None: not submitted
    key: str = ""


@dataclass
class Course:
    root: Path
    assignment: str = "mha"
    db_url: str = ""

    def __post_init__(self):
        self.root = Path(self.root).resolve()
        self.db_url = self.db_url or f"sqlite:///{self.root / 'gradebook.db'}"
        self.releases = notebooks.load_release(self.root / "exercises" / self.assignment)
        self.timestamps: dict[str, collected.Timestamp] = {}  # student -> their timestamp.txt, as read this run
        digest = hashlib.sha256()
        for name, release in sorted(self.releases.items()):
            digest.update(json.dumps(release.cells, sort_keys=True).encode())
        self.release_key = digest.hexdigest()

    def timestamp(self, student: str) -> collected.Timestamp:
        """The student's timestamp.txt (collected.py), read once per run (by planning; the late penalties of the
        run's grades and the feedback's collect files are those of this read)."""
        if student not in self.timestamps:
            self.timestamps[student] = collected.read_timestamp(self.folder("submitted", student))
        return self.timestamps[student]

    def folder(self, kind: str, student: str) -> Path:
        return self.root / kind / student / self.assignment

    def students(self) -> tuple[list[str], list[str]]:
        """(student ids whose folder holds an assignment folder to grade, a note for every other entry of
        submitted/: each names the student or entry and why nothing of it is graded)."""
        found, problems = [], []
        for name, problem in self._folders():
            if problem:
                problems.append(problem)
            else:
                found.append(name)
        return found, problems

    def ungraded(self) -> list[tuple[str, str]]:
        """(the entry of submitted/, why none of it is graded) for every entry that is not a student's
        gradeable folder (the summary names them)."""
        return [(name, problem) for name, problem in self._folders() if problem]

    def _folders(self):
        """(name, None) for each gradeable student folder of submitted/, (name, why not) for each other entry.
        Nothing is followed: a link (to a folder or not) is never a student's folder, nor their assignment's."""
        base = self.root / "submitted"
        for entry in sorted(base.iterdir()) if base.is_dir() else []:
            name, folder = entry.name, entry / self.assignment
            if entry.is_symlink() or not entry.is_dir():
                yield name, f"submitted/{name} is not a folder (a link or a file): not graded"
            elif not STUDENT_ID.fullmatch(name):
                yield name, f"submitted/{name}: not a valid student id: not graded"
            elif folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
                yield name, (f"{name}: submitted/{name}/{self.assignment} is not a folder (a link, which is never "
                             f"followed, or a file): nothing of {name}'s was graded")
            elif not folder.is_dir():
                yield name, f"{name}: submitted/{name} holds no {self.assignment} folder: nothing of {name}'s was graded"
            else:
                yield name, None

    def submission(self, student: str) -> tuple[dict[str, Path | None], list[Path], list[str]]:
        """({release notebook: its submitted file or None}, the candidates for a renamed notebook, at most one
        note on what else is there); nothing is opened.

        A notebook handed in under another name is recognised by its grade ids when the expected name is
        missing: the candidates are the other ``.ipynb`` files (regular files, at most MAX_RENAMED), read
        when the job is made (jobs.Maker). Anything else (a link, another file, a folder) is counted and
        named in one line, never read, copied or followed; nbgrader's collect files (timestamp.txt,
        submission_secret.txt, regular files) are not named: collected.py reads them. The folder is listed up
        to MAX_ENTRIES entries.
        """
        folder = self.folder("submitted", student)
        files, more = {}, False
        with os.scandir(folder) as entries:
            for entry in entries:
                if len(files) == MAX_ENTRIES:
                    more = True
                    break
                files[entry.name] = entry
        for name in collected.NAMES:  # nbgrader's collect files (read by collected.py), not something handed in besides
            if name in files and files[name].is_file(follow_symlinks=False):
                del files[name]
        chosen: dict[str, Path | None] = {}
        for name in self.releases:  # looked up by name, however many entries the folder has
            files.pop(f"{name}.ipynb", None)
            path = folder / f"{name}.ipynb"
            chosen[name] = path if os.path.lexists(path) else None
        candidates, skipped = [], []
        for fname, entry in sorted(files.items()):
            if None in chosen.values() and len(candidates) < MAX_RENAMED and fname.endswith(".ipynb") \
                    and entry.is_file(follow_symlinks=False):
                candidates.append(Path(entry.path))
            else:
                skipped.append(Path(entry.path))
        return chosen, candidates, [_skipped_line(skipped, more)] if skipped or more else []

    def context(self, fingerprint: str) -> str:
        """What a stamp is valid for besides the bytes: this release, this secret, this grader version."""
        return hashlib.sha256(f"{self.release_key}/{fingerprint}/{GRADER_VERSION}".encode()).hexdigest()[:16]

    def key(self, digest: str, fingerprint: str) -> str:
        return hashlib.sha256(f"{digest}/{self.release_key}/{fingerprint}/{GRADER_VERSION}".encode()).hexdigest()

    def stamps(self, student: str) -> dict:
        """{notebook: its stamp} (see jobs.py: the key of what was graded and the status of the file it was)."""
        try:
            return json.loads((self.folder("autograded", student) / ".graded.json").read_text())
        except (OSError, ValueError):
            return {}

    def stamp(self, student: str, stamps: dict[str, dict]) -> None:
        """Record the notebooks of ``stamps`` ({notebook: stamp}) as graded, after their grades are committed
        (one atomic replace for them all)."""
        folder = self.folder("autograded", student)
        folder.mkdir(parents=True, exist_ok=True)
        stamps = self.stamps(student) | stamps
        tmp = folder / ".graded.json.tmp"
        tmp.write_text(json.dumps(stamps, indent=1))
        os.replace(tmp, folder / ".graded.json")

    def unstamp(self, student: str, names: list[str]) -> None:
        """Record the notebooks ``names`` as not graded (a --force run, before it grades them again)."""
        stamps = self.stamps(student)
        if not set(names) & set(stamps):
            return
        folder = self.folder("autograded", student)
        tmp = folder / ".graded.json.tmp"
        tmp.write_text(json.dumps({k: v for k, v in stamps.items() if k not in names}, indent=1))
        os.replace(tmp, folder / ".graded.json")


def _skipped_line(skipped: list[Path], more: bool) -> str:
    """One readable line: how many items were not read, of which kinds, and the first few names."""
    kinds = {"link": 0, "folder": 0, "other file": 0}
    for path in skipped:
        kinds["link" if path.is_symlink() else "folder" if path.is_dir() else "other file"] += 1
    counted = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in kinds.items() if n)
    names = ", ".join(shown(p.name) for p in skipped[:3]) + (", ..." if len(skipped) > 3 else "")
    return (f"{len(skipped)}{'+' if more else ''} item(s) handed in besides the notebooks were not read "
            f"({counted}{'; the folder holds more than ' + str(MAX_ENTRIES) + ' entries' if more else ''}): {names}.")


def shown(name: str) -> str:
    """A file name as one short, printable token (control characters escaped, cut to 40 characters)."""
    text = name if name.isprintable() else name.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= 40 else text[:37] + "..."
