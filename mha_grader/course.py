"""The course on disk: release, submissions, what is already graded, and the gradebook.

Folders follow nbgrader's: exercises/<assignment>/ (the release), submitted/<student>/<assignment>/,
autograded/<student>/<assignment>/, feedback/<student>/<assignment>/. The gradebook is nbgrader's
(sqlite by default, any SQLAlchemy URL such as PostgreSQL), written only by this process.

A notebook counts as graded when its grades are committed and a stamp holds the key of what was
graded: the notebook's bytes, the release, the secret's fingerprint and the grader's version. A
run that is killed leaves every committed grade; the next run grades exactly what is missing or
changed (a re-submitted notebook has new bytes, hence a new key).
"""
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import notebooks

GRADER_VERSION = "1"
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
        digest = hashlib.sha256()
        for name, release in sorted(self.releases.items()):
            digest.update(json.dumps(release.cells, sort_keys=True).encode())
        self.release_key = digest.hexdigest()

    def folder(self, kind: str, student: str) -> Path:
        return self.root / kind / student / self.assignment

    def students(self) -> tuple[list[str], list[str]]:
        """(student ids with a submission folder, problems with other entries of submitted/)."""
        found, problems = [], []
        base = self.root / "submitted"
        for entry in sorted(base.iterdir()) if base.is_dir() else []:
            if entry.is_symlink() or not entry.is_dir():
                problems.append(f"submitted/{entry.name} is not a folder; ignored")
            elif not STUDENT_ID.fullmatch(entry.name):
                problems.append(f"submitted/{entry.name}: not a valid student id; ignored")
            elif (entry / self.assignment).is_dir() and not (entry / self.assignment).is_symlink():
                found.append(entry.name)
        return found, problems

    def submission(self, student: str) -> tuple[dict[str, Path | None], list[str]]:
        """{release notebook: its submitted file or None}, and notes on files that are not expected.

        A notebook handed in under another name is recognised by its grade ids when the expected
        name is missing; any other file is listed and left alone (never read, copied or followed).
        """
        folder = self.folder("submitted", student)
        files = {p.name: p for p in folder.iterdir()}
        chosen: dict[str, Path | None] = {}
        for name in self.releases:
            path = files.pop(f"{name}.ipynb", None)
            chosen[name] = path if path is not None and not path.is_symlink() and path.is_file() else None
            if path is not None and chosen[name] is None:
                chosen[name] = path  # read_submission says why it cannot be read
        notes = []
        for fname, path in sorted(files.items()):
            match = self._renamed(path, [n for n, p in chosen.items() if p is None])
            if match:
                chosen[match] = path
                notes.append(f"{fname} is graded as {match}.ipynb (its cells carry that notebook's ids).")
            else:
                notes.append(f"{fname} is not part of the assignment; it was not read.")
        return chosen, notes

    def _renamed(self, path: Path, missing: list[str]) -> str | None:
        if not missing or not path.name.endswith(".ipynb"):
            return None
        nb, _, _ = notebooks.read_submission(path)
        if nb is None:
            return None
        ids = {notebooks.nbgrader_meta(c).get("grade_id") for c in nb["cells"]}
        return next((m for m in missing if {g.id for g in self.releases[m].grade_cells} & ids), None)

    def key(self, digest: str, fingerprint: str) -> str:
        return hashlib.sha256(f"{digest}/{self.release_key}/{fingerprint}/{GRADER_VERSION}".encode()).hexdigest()

    def stamps(self, student: str) -> dict:
        try:
            return json.loads((self.folder("autograded", student) / ".graded.json").read_text())
        except (OSError, ValueError):
            return {}

    def stamp(self, student: str, keys: dict[str, str]) -> None:
        """Record the notebooks of ``keys`` ({notebook: key}) as graded, after their grades are committed
        (one atomic replace for them all)."""
        folder = self.folder("autograded", student)
        folder.mkdir(parents=True, exist_ok=True)
        stamps = self.stamps(student) | keys
        tmp = folder / ".graded.json.tmp"
        tmp.write_text(json.dumps(stamps, indent=1))
        os.replace(tmp, folder / ".graded.json")
