"""The sandbox on its own: what student code can and cannot do to the machine, test by test.

Each job here runs hostile cells directly in the sandbox (the grader's static rule would refuse
most of them before they ran; these tests check the layer underneath). A test records an
outcome for a function ``probe`` defined by the cells; its result is whatever the hostile code
managed to see, and the assertions read it.
"""
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from mha_checks import calling
from mha_grader import sandbox

REPO = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's tests run as root, as CI does")
pytestmark = needs_root


def job(*cells: str, tests: int = 1, torch: bool = False) -> dict:
    """A job whose cells are ``cells`` and whose ``tests`` tests each call probe() once."""
    return {"torch": torch,
            "cells": [{"label": f"c{i}", "source": textwrap.dedent(c)} for i, c in enumerate(cells)],
            "tests": [{"id": f"t{i}", "cases": [{"function": "probe", "names": [], "specs": []}]}
                      for i in range(tests)]}


def outcomes(report: sandbox.Report) -> dict:
    return {r["test"]: r["outcome"] for r in report.records if "outcome" in r}


def statuses(report: sandbox.Report) -> dict:
    return {r["test"]: r["status"] for r in report.records if "status" in r}


def result(report, test="t0"):
    return calling.decode(outcomes(report)[test]["result"])


def sandbox_processes() -> list[str]:
    """Processes of the sandbox users (uid 61000 and up) still running anywhere on the machine."""
    out = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if line.split() and sandbox.UID_BASE <= int(line.split()[0]) < sandbox.UID_BASE + sandbox.SLOTS]


def test_probe_finds_the_isolation_complete():
    private = [str(REPO / "solutions"), str(REPO / "nbgrader_config.py"), "/root", "/etc/shadow"]
    assert sandbox.probe(private[:2] + ["/etc/shadow"], sandbox.python_prefixes()) == []


def test_probe_reports_what_the_unsafe_mode_exposes():
    problems = sandbox.probe([str(REPO / "solutions")], [], unsafe=True)
    assert any("unprivileged user" in p for p in problems), problems
    assert any(f"cannot read {REPO / 'solutions'}" in p for p in problems), problems


def test_course_files_home_and_secrets_are_invisible():
    report = sandbox.run(job(f"""
        import os
        def probe():
            private = {[str(REPO / "solutions"), str(REPO / "gradebook.db"), str(REPO / "mha_lib"),
                        "/root/.bashrc", "/root/.config", "/home", "/etc/passwd", "/etc/shadow"]!r}
            repo = {str(REPO)!r}
            return ([p for p in private if os.path.exists(p)], sorted(os.listdir("/")),
                    sorted(os.listdir(repo)) if os.path.isdir(repo) else [])
    """))
    found, root, repo = result(report)
    assert found == [], found
    # The root holds the system folders, the job and the top folders of the Python installation
    # (wherever the checkout lives); of the checkout, only its virtual environment, if it has one.
    prefixes = [Path(p) for p in sandbox.python_prefixes()]
    allowed = {"bin", "dev", "etc", "job", "lib", "lib64", "proc", "sbin", "tmp", "usr"}
    allowed |= {p.parts[1] for p in prefixes}
    assert set(root) <= allowed, root
    assert set(repo) <= {p.relative_to(REPO).parts[0] for p in prefixes if p.is_relative_to(REPO)}, repo


def test_nothing_outside_its_scratch_folder_is_writable(tmp_path):
    venv = Path(sys.prefix)
    targets = [venv / "lib" / "python3.11" / "site-packages" / "evil.pth", REPO / "mha_lib" / "evil.py",
               Path(sys.base_prefix) / "evil", Path("/usr/evil"), Path("/job/evil"), Path("/evil"),
               Path("/root/evil")]
    report = sandbox.run(job(f"""
        def probe():
            wrote = []
            for path in {[str(t) for t in targets]!r}:
                try:
                    with open(path, "w") as fh:
                        fh.write("import os; os.system('touch /tmp/pwned')")
                    wrote.append(path)
                except OSError:
                    pass
            with open("/tmp/scratch.txt", "w") as fh:
                fh.write("ok")
            return wrote
    """))
    assert result(report) == []
    assert not any(t.exists() for t in targets)


def test_no_network_not_even_the_hosts_loopback():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        report = sandbox.run(job(f"""
            import socket
            def probe():
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=2)
                    return "connected"
                except OSError as err:
                    return type(err).__name__
        """))
    assert result(report) != "connected"


def test_runs_as_an_unprivileged_user_in_its_own_process_namespace():
    report = sandbox.run(job("""
        import os
        def probe():
            return [os.getuid(), os.getgid(), len([p for p in os.listdir("/proc") if p.isdigit()])]
    """))
    uid, gid, processes = result(report)
    assert uid >= sandbox.UID_BASE and gid >= sandbox.UID_BASE
    assert processes <= 3  # the harness and this test's process


HOSTILE = '''
import os, sys, signal, time, subprocess
import numpy as np

def probe(test):
    if test == 0:
        os._exit(3)
    if test == 1:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    if test == 2:
        subprocess.Popen(["sleep", "1000"], start_new_session=True)
        if os.fork() == 0:
            os.setsid()
            time.sleep(1000)
        for _ in range(500):
            try:
                os.fork()
            except OSError:
                break
        return "forked"
    if test == 3:
        return np.ones((1 << 40,)).sum()
    if test == 4:
        sys.stdout.write("x" * (120 << 20))
        return "flooded"
    if test == 5:
        os.write(int(sys.argv[1]), b"not json\\n" * 1000)
        return "spammed"
    return "fine"
'''


def test_a_crash_costs_only_its_own_test_and_leaves_nothing_running():
    """Test 0 exits the process, 1 hangs ignoring signals, 2 forks a sleeper and a fork bomb,
    3 blows up memory, 4 floods stdout, 5 writes to the report channel's number (it is not there); 6 still runs normally."""
    the_job = job(HOSTILE)
    the_job["tests"] = [{"id": f"t{i}", "cases": [{"function": "probe", "names": ["test"], "specs": [i]}]}
                        for i in range(7)]
    start = time.monotonic()
    report = sandbox.run(the_job, sandbox.Limits(test_s=5, notebook_s=60, memory=3 << 30))
    elapsed = time.monotonic() - start
    status, got = statuses(report), outcomes(report)
    assert status["t0"] == "exit"
    assert status["t1"] == "timeout"
    assert status["t2"] == "done" and calling.decode(got["t2"]["result"]) == "forked"
    assert got.get("t3", {}).get("error", {}).get("type") == "MemoryError" or status["t3"] == "signal"
    assert status["t4"] == "done" and calling.decode(got["t4"]["result"]) == "flooded"
    assert status["t5"] == "done" and report.garbage == 0  # the code under test never holds the channel
    assert status["t6"] == "done" and calling.decode(got["t6"]["result"]) == "fine"
    assert elapsed < 30
    assert sandbox_processes() == []


def test_a_notebook_cannot_take_more_than_its_time_budget():
    report = sandbox.run(job("import time\ndef probe():\n    time.sleep(4)\n    return 1\n", tests=5),
                         sandbox.Limits(test_s=4.5, notebook_s=10))
    status = statuses(report)
    assert list(status.values()).count("done") == 2
    assert status["t4"] == "budget"
    assert report.seconds < 15


def test_the_report_is_plain_data_even_from_lying_objects():
    report = sandbox.run(job("""
        import numpy as np
        class Liar(np.ndarray):
            def __eq__(self, other):
                return True
            def tolist(self):
                return "lies"
        class Always:
            def __eq__(self, other):
                return True
            def __array__(self, dtype=None, copy=None):
                raise RuntimeError("no")
        def probe():
            return (np.arange(3.0).view(Liar), Always())
    """))
    value = result(report)
    np.testing.assert_array_equal(value[0], np.arange(3.0))
    assert type(value[0]) is np.ndarray and isinstance(value[1], calling.Other)


def test_sandbox_processes_are_gone_even_when_the_grader_is_killed(tmp_path):
    """SIGKILL the process that runs a sandbox mid-job: its namespace dies with it."""
    script = tmp_path / "run_job.py"
    sleeper = job("import subprocess, time\ndef probe():\n    subprocess.Popen(['sleep', '1000'])\n"
                  "    time.sleep(1000)\n")
    script.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(REPO)!r})
        from mha_grader import sandbox
        sandbox.run(json.loads({json.dumps(json.dumps(sleeper))}), sandbox.Limits(test_s=100, notebook_s=100))
    """))
    proc = subprocess.Popen([sys.executable, str(script)])
    deadline = time.monotonic() + 20
    while not sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandbox_processes(), "the job never started"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandbox_processes() == []


def test_cells_that_hang_cost_one_timeout_not_one_per_test():
    report = sandbox.run(job("while True:\n    pass\n", tests=4), sandbox.Limits(test_s=2, notebook_s=30))
    assert statuses(report) == {"t0": "cells", "t1": "cells", "t2": "cells", "t3": "cells"}
    assert report.seconds < 8


def test_the_unsafe_mode_runs_the_same_job_and_leaves_the_host_alone():
    """Without a sandbox the harness must not clean up as if it owned the machine."""
    import stat
    report = sandbox.run(job("def probe():\n    return 42\n", tests=2), unsafe=True)
    assert [calling.decode(o["result"]) for o in outcomes(report).values()] == [42, 42]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_no_descriptor_but_the_report_channel_enters_the_sandbox():
    """Above all not the fork server's socket, through which a job could ask for another sandbox; and
    the student's code holds not even the report channel (a socket the harness alone keeps), only
    its two pipes to the harness."""
    report = sandbox.run(job("""
        import os
        def probe():
            held = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    held.append(os.readlink(f"/proc/self/fd/{fd}"))
                except FileNotFoundError:
                    pass  # the descriptor listdir itself used, closed by now
            return sorted(held)
    """))
    held = result(report)
    assert not [link for link in held if link.startswith("socket:")], held
    assert sum(link.startswith("pipe:") for link in held) == 2, held  # to and from the harness
    assert all(link.startswith(("pipe:", "/dev/null")) for link in held), held
