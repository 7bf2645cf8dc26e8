"""Planning a run and making its jobs: each notebook's bytes are read once, when its job is made.

Planning (:func:`plan`) opens no notebook. It keeps, per notebook to grade, a small record: the
student, the notebook, the path of the file handed in under its name (None: none) and the key of its
stamp. A notebook is left out when its stamp is current: written for this release, secret and grader
version, for a file whose status (:func:`notebooks.status`: type, inode, size, times; a link's own) is
the status at the path now, and read at least RACY_NS after that status last changed (a write within
the file system's clock tick of the read can leave the status as it was, so such a stamp is not
trusted, as git does not trust its index then). ``--force`` plans every notebook. A class of 10,000
students plans in one walk of their folders, in memory of one record per notebook to grade.

A job is made from its record when its turn comes (:class:`Maker`: in the thread that grades it, or in
this process just before it is sent to a Dask worker). The file is read once
(:func:`notebooks.read_file`); the sha256 of those bytes keys the draw of the hidden inputs, the grade
and the stamp, and the job carries the bytes themselves (the worker decodes them within
:func:`notebooks.parse`'s bounds). So what is graded is what was drawn for and what is stamped,
whatever the file holds later: a file handed in again during the run is named at the end ("changed
during the run") and, its status being another, graded by the next run. A file that is refused (a
link, a folder, anything but a regular file, too large) draws nothing and is never graded: each test
scores 0 with the reason, the run names it, and its stamp is the refusal's, which no graded bytes
share. A job whose bytes are those its stamp was made from (only the status changed) is not graded
again: it comes back "unchanged", and only the stamp's status is renewed.

A notebook missing under its own name is looked for among the student's other ``.ipynb`` files (at
most course.MAX_RENAMED, the candidates): the first of that student's jobs that needs them reads each
once, and the file whose cells carry a missing notebook's grade ids is graded as that notebook.
"""
import datetime
import threading
import time
from pathlib import Path

from mha_checks.hidden import hidden_cases

from . import collected, notebooks, secret as course_secret
from .course import shown

NOT_GRADED = ("unreadable", "ungradable")  # results that say why a notebook was not graded (judging.py)
RACY_NS = 2_000_000_000  # a status changed less than this before its read is not trusted at the next planning


def plan(course, key: bytes, args) -> tuple[list[dict], list[str]]:
    """The records of the (student, notebook) jobs still to grade (new, changed, or all with --force),
    and planning's notes (entries of submitted/ not graded, what students handed in besides the notebooks,
    students not graded because their timestamp.txt is not usable, times handed in later than now: collected.py)."""
    context = course.context(course_secret.fingerprint(key))
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)  # (nbgrader keeps times as naive UTC)
    students, notes = course.students()
    students = [s for s in students if not args.student or s in args.student]
    notes += [f"{s}: no submission folder" for s in args.student if s not in students]
    records = []
    for student in students:
        files, candidates, extra = course.submission(student)
        notes += [f"{student}: {n}" for n in extra]
        handed_in = course.timestamp(student)
        if handed_in.problem:  # (autograde stops on it too: the time decides lateness)
            notes.append(f"{student}: not graded: {handed_in.problem}; correct or remove "
                         f"submitted/{student}/{course.assignment}/{collected.TIMESTAMP}")
            continue
        if handed_in.at is not None and handed_in.at > now:
            notes.append(f"{student}: {collected.TIMESTAMP} says {handed_in.at:%Y-%m-%d %H:%M:%S} UTC, later than now: "
                         "a clock set wrong, a time zone nbgrader reads as UTC, or a file written by hand")
        stamps = course.stamps(student)
        mine = []
        for name, path in files.items():
            if args.notebook and name not in args.notebook:
                continue
            stamp = stamps.get(name)
            if args.force or not current(stamp, context, path, [] if path else candidates):
                mine.append({"student": student, "notebook": name, "path": path and str(path),
                             "stamped": stamp.get("key") if isinstance(stamp, dict) else stamp})
        looking = tuple(r["notebook"] for r in mine if r["path"] is None)
        if candidates and looking:  # (these few values are shared by the student's records)
            missing, paths = tuple(n for n, p in files.items() if p is None), tuple(map(str, candidates))
            for record in mine:
                if record["path"] is None:
                    record.update(candidates=paths, missing=missing, looking=looking)
        records += mine
    return records, notes


def current(stamp, context: str, path: Path | None, candidates: list[Path]) -> bool:
    """Whether ``stamp`` stands for what is handed in now: the named file ``path``, or (when it is None)
    the candidates for a renamed notebook, all with the statuses that were read."""
    if not isinstance(stamp, dict) or stamp.get("context") != context:
        return False
    if path is not None:
        now = notebooks.status(path)
        return stamp.get("file") == path.name and now == stamp.get("status") and _settled(now, stamp)
    seen = [[c.name, notebooks.status(c)] for c in candidates]
    return stamp.get("file") in (None, *(c.name for c in candidates)) and seen == stamp.get("others") \
        and all(_settled(status, stamp) for _, status in seen)


def _settled(status: list | None, stamp: dict) -> bool:
    """The status last changed well before the stamp's read (a later write must show in it)."""
    return status is None or status[5] < stamp.get("read_ns", 0) - RACY_NS


class Maker:
    """Makes the job of a planned record (a callable; any thread may call it)."""

    def __init__(self, course, key: bytes, force: bool = False):
        self.course, self.key, self.force = course, key, force
        self.fingerprint = course_secret.fingerprint(key)
        self.context = course.context(self.fingerprint)
        self.renamed: dict[str, dict] = {}  # student -> their renamed notebooks found, kept until their jobs are made
        self.lock = threading.Lock()

    def __call__(self, record: dict) -> dict:
        """The job of ``record``: the notebook's bytes (read now, once) and the hidden inputs drawn from them.
        The record gets what the coordinator needs once the job is done: the path read, the stamp to write
        when its grades are committed, notes."""
        read, path, others, since = self._read(record)
        key = self.course.key(read.digest or f"not read: {read.reason}", self.fingerprint)
        record["path"] = path and str(path)
        record["stamp"] = {"key": key, "context": self.context, "file": path and path.name, "status": read.status,
                           "read_ns": since, **({"others": others} if others is not None else {})}
        job = {"student": record["student"], "notebook": record["notebook"], "raw": read.raw,
               "reason": read.reason, "cases": {}}
        if key == record.get("stamped") and not self.force:
            return {**job, "raw": None, "unchanged": True}
        if read.raw is not None:
            job["cases"] = self.draw(record["student"], record["notebook"], read.digest)
        return job

    def draw(self, student: str, name: str, digest: str) -> dict:
        """{grade id: its hidden cases} for these bytes of this student's notebook (secret.rng)."""
        return {g.id: hidden_cases(g.id, course_secret.rng(self.key, self.course.assignment, name, g.id, student,
                                                           digest))
                for g in self.course.releases[name].grade_cells}

    def _read(self, record: dict) -> tuple[notebooks.Read, Path | None, list | None, int]:
        """(the read, the path read or None, the candidates' [name, status] if they were looked at, when the
        first of these reads began)."""
        if record["path"]:
            read = notebooks.read_file(record["path"])
            return read, Path(record["path"]), None, read.at_ns
        if "candidates" not in record:  # (nor any other .ipynb file: no candidate was looked at)
            return notebooks.Read(None, None, "was not handed in"), None, [], time.time_ns()
        student = record["student"]
        with self.lock:  # the first of the student's jobs made reads the candidates, for all of them
            found = self.renamed.get(student)
            if found is None:
                found = self.renamed[student] = self._look(record)
            found["left"].discard(record["notebook"])
            read, path = found["reads"].pop(record["notebook"], (None, None))
            if not found["left"]:
                del self.renamed[student]
            record["notes"] = found.pop("notes", [])
        if path is None:
            return notebooks.Read(None, None, "was not handed in"), None, found["others"], found["at"]
        record["notes"].append(f"{student}: {shown(path.name)} is graded as {record['notebook']}.ipynb (its cells "
                               "carry that notebook's ids)")
        return read, path, found["others"], found["at"]

    def _look(self, record: dict) -> dict:
        """Read each candidate once; each missing notebook (in the release's order) takes the first file whose
        cells carry one of its grade ids. Only the bytes of the notebooks this run grades are kept."""
        at, missing, looking = time.time_ns(), list(record["missing"]), set(record["looking"])
        reads, others, unmatched = {}, [], []
        for path in map(Path, record["candidates"]):
            read = notebooks.read_file(path)
            others.append([path.name, read.status])
            nb = notebooks.parse(read.raw)[0] if read.raw is not None else None
            ids = {notebooks.nbgrader_meta(c).get("grade_id") for c in nb["cells"]} if nb else set()
            match = next((m for m in missing if {g.id for g in self.course.releases[m].grade_cells} & ids), None)
            if match:
                missing.remove(match)
                if match in looking:
                    reads[match] = (read, path)
            else:
                unmatched.append(shown(path.name))
        notes = [f"{record['student']}: {len(unmatched)} other notebook file(s) hold none of the missing notebooks' "
                 f"cells, so they are not graded: {', '.join(unmatched[:3])}{', ...' if len(unmatched) > 3 else ''}"
                 ] if unmatched else []
        return {"at": at, "reads": reads, "left": looking, "others": others, "notes": notes}


def notes_after(results: list, failed: list, changed: list) -> list[str]:
    """Notes on the jobs of a run once it is done: what making them found (renamed notebooks), the
    notebooks not graded (refused or unreadable), and those handed in again after they were read (``changed``:
    :func:`changed_during_run`'s; graded as read, the next run grades the new version, its status being another)."""
    notes = [n for job, _ in results for n in job.get("notes", ())] + [n for job in failed for n in job.get("notes", ())]
    for job, result in results:
        if result.get("status") in NOT_GRADED:
            notes.append(f"{job['student']}/{job['notebook']}: not graded: " + "; ".join(result.get("notes", []))[:300])
    notes += [f"{job['student']}/{job['notebook']}: changed during the run; the next run grades it"
              for job in changed]
    return notes


def changed_during_run(course, results: list) -> list[dict]:
    """The jobs of ``results`` whose file is no longer the one read (handed in again during the run)."""
    def named(job):
        return job["path"] or course.folder("submitted", job["student"]) / f"{job['notebook']}.ipynb"
    return [job for job, _ in results if "stamp" in job and notebooks.status(named(job)) != job["stamp"]["status"]]
