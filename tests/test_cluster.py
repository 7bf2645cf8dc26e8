"""mha_grader's two backends without a sandbox. cluster.Dask on a Dask cluster inside this process
(threads, so the grading function can be replaced; one task per student): a sandbox failure is retried,
a job that keeps failing is reported, every other job gives exactly one result, a job planned twice is
refused, and a stop reaches a task that is running.
execute.Threads: only a sandbox failure is tried again; a bug of the grader is reported once."""
from collections import Counter
from types import SimpleNamespace

import pytest
from distributed import LocalCluster

from mha_grader.trusted import cluster, execute
from mha_grader.walls import sandbox


@pytest.fixture(scope="module")
def scheduler():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as local:
        yield local.scheduler_address


def jobs(*students: str) -> list[dict]:
    return [{"student": s, "notebook": nb, "key": f"{s}{nb}".ljust(16, "0"), "nb": {}, "reason": "", "seeds": {}}
            for s in students for nb in ("01_a", "02_b")]


def grade(scheduler, plan, monkeypatch, fake):
    monkeypatch.setattr(execute, "grade_job", fake)
    course = SimpleNamespace(releases={"01_a": "release a", "02_b": "release b"})
    backend = cluster.Dask(scheduler, 2, course.releases, sandbox.Limits(), unsafe=True)
    try:
        backend.start(plan)
        return [arrival for arrival in backend.results(0.05) if arrival is not None]
    finally:
        backend.close()


def test_retried_reported_and_each_job_once(scheduler, monkeypatch):
    calls = Counter()

    def fake(release, job, limits, unsafe):
        calls[job["student"], job["notebook"]] += 1
        if job["student"] == "flaky" and calls["flaky", job["notebook"]] == 1:
            raise execute.InfraError("the sandbox failed once")
        if job["student"] == "broken":
            raise execute.InfraError("the sandbox always fails")
        return {"graded": (job["student"], job["notebook"]), "release": release}

    plan = jobs("alice", "flaky", "broken", "bob")
    done = grade(scheduler, plan, monkeypatch, fake)
    assert sorted((j["student"], j["notebook"]) for j, _ in done) == sorted((j["student"], j["notebook"]) for j in plan)
    for job, result in done:
        if job["student"] == "broken":
            assert result == {"failed": "the sandbox always fails; tried 3 times"}
        else:
            assert result == {"graded": (job["student"], job["notebook"]),
                              "release": "release a" if job["notebook"] == "01_a" else "release b"}
    assert calls["flaky", "01_a"] == 2 and calls["broken", "02_b"] == 3  # retries=2: three tries at most
    assert calls["alice", "01_a"] == calls["bob", "02_b"] == 1


def test_a_students_results_come_together(scheduler, monkeypatch):
    """One task per student: their results arrive one after the other."""
    monkeypatch.setattr(execute, "grade_job", lambda release, job, limits, unsafe: {"graded": job["notebook"]})
    backend = cluster.Dask(scheduler, 2, {"01_a": "release a", "02_b": "release b"}, sandbox.Limits(), unsafe=True)
    try:
        backend.start(jobs("alice", "bob", "carol"))
        given = [(job["student"], result) for job, result in filter(None, backend.results(0.05))]
    finally:
        backend.close()
    students = [student for student, _ in given]
    assert sorted(students) == ["alice", "alice", "bob", "bob", "carol", "carol"]
    assert all(students[i] == students[i + 1] for i in (0, 2, 4)), students  # a student's two come together
    assert [result for _, result in given] == [{"graded": "01_a"}, {"graded": "02_b"}] * 3


def test_a_job_planned_twice_is_refused(scheduler, monkeypatch):
    plan = jobs("alice")
    with pytest.raises(AssertionError, match="planned twice"):
        grade(scheduler, plan + plan[:1], monkeypatch, lambda *a: {})


def test_a_stop_reaches_a_running_student_task_and_no_other_run(monkeypatch):
    """On the worker: stopped during a student's first notebook, the task grades no further notebook, the
    one it was grading comes back not graded, and no sandbox starts for that run; another run goes on."""
    graded = []

    def fake(release, job, limits, unsafe):
        graded.append(job["notebook"])
        cluster.stop_run("stopped-run")  # the coordinator's stop arrives while this notebook is graded
        return {"graded": job["notebook"]}

    monkeypatch.setattr(execute, "grade_job", fake)
    releases = {"01_a": "release a", "02_b": "release b"}
    try:
        results = cluster.grade_student_on_worker(releases, jobs("alice"), sandbox.Limits(), True,
                                                  execute.fingerprint(), "stopped-run")
        assert graded == ["01_a"]
        assert results == [{"failed": "grading stopped while this notebook was being graded"},
                           {"failed": "grading stopped before this notebook was graded"}]
        with sandbox.stopping_with(cluster._stop_of("stopped-run")), pytest.raises(sandbox.Ended):
            sandbox.run({"torch": False, "cells": [], "tests": []}, sandbox.Limits(), unsafe=True)
        monkeypatch.setattr(execute, "grade_job", lambda release, job, limits, unsafe: {"graded": release})
        assert cluster.grade_student_on_worker(releases, jobs("bob"), sandbox.Limits(), True, execute.fingerprint(),
                                               "another-run") == [{"graded": "release a"}, {"graded": "release b"}]
    finally:
        cluster.forget_run("stopped-run")
        cluster.forget_run("another-run")


def test_only_sandbox_failures_are_retried_and_a_grader_bug_is_reported_once(monkeypatch):
    """The local threads: an InfraError is tried three times, and so is a job the machine held back (a time limit
    that stopped it before the student's code spent that time: never a grade); any other error of the grader
    once, in words."""
    from mha_grader.trusted import feedback, judging
    calls = Counter()

    def fake(release, nb, reason, cases, limits, unsafe):
        calls[reason] += 1
        if reason == "infra":
            return {"status": "infra", "notes": ["the fork server went away"]}
        if reason == "machine":
            return {"status": "machine", "notes": ["the machine held its job back: t was stopped after 100 s"]}
        if reason == "bug":
            raise KeyError("cases")
        return {"status": "graded", "tests": [], "notes": []}

    monkeypatch.setattr(judging, "grade_notebook", fake)
    monkeypatch.setattr(feedback, "render", lambda release, nb, result, student: "the page")
    plan = [{"student": s, "notebook": "01_a", "key": "k", "nb": {}, "reason": s, "seeds": {}}
            for s in ("infra", "machine", "bug", "fine")]
    backend = execute.Threads({"01_a": "release a"}, 2, sandbox.Limits(), unsafe=True)
    backend.stopping.wait = lambda seconds: None  # no pause between tries in a test
    backend.start(plan)
    done = {job["reason"]: result for job, result in filter(None, backend.results(0.05))}
    backend.close()
    assert calls == {"infra": 3, "machine": 3, "bug": 1, "fine": 1}
    assert done["infra"] == {"failed": "the sandbox returned nothing (the fork server went away); tried 3 times"}
    assert done["machine"] == {"failed": "the machine held its job back: t was stopped after 100 s; tried 3 times"}
    assert done["bug"]["failed"].startswith("the grader itself failed on this notebook (KeyError: 'cases')")
    assert done["fine"] == {"status": "graded", "tests": [], "notes": [], "feedback": "the page"}
