"""The sandbox on its own: what student code can and cannot do to the machine, test by test.

Each job here runs hostile cells directly in the sandbox (the grader's static rule would refuse
most of them before they ran; these tests check the layer underneath). A test records an
outcome for a function ``probe`` defined by the cells; its result is whatever the hostile code
managed to see, and the assertions read it.
"""
import ctypes
import dataclasses
import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
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
    """Processes of the sandbox users (uid sandbox.UID_BASE and up) still running anywhere on the machine."""
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
    allowed = {"bin", "dev", "etc", "job", "lib", "lib64", "proc", "python", "sbin", "tmp", "usr"}
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


def test_the_tests_run_in_one_process_until_one_ends_it():
    """The cells run once and the tests one after another in one process, as in a kernel; what a test
    leaves running is killed before the next; a test that ends the process costs that test alone, and
    the next one starts in a new process that runs the cells again."""
    counting = job("""
        import os, subprocess
        with open("/tmp/runs", "a") as fh:
            fh.write("x")
        calls = []
        def living():
            pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
            return [p for p in pids if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
        def probe():
            calls.append(1)
            if len(calls) == 2:
                subprocess.Popen(["sleep", "1000"])
            if len(calls) == 4:
                os._exit(3)
            return [open("/tmp/runs").read().count("x"), len(calls), len(living())]
    """, tests=5)
    report = sandbox.run(counting)
    assert statuses(report) == {"t0": "done", "t1": "done", "t2": "done", "t3": "exit", "t4": "done"}
    got = {test: calling.decode(outcome["result"]) for test, outcome in outcomes(report).items()}
    assert got == {"t0": [1, 1, 0], "t1": [1, 2, 1], "t2": [1, 3, 0], "t4": [2, 1, 0]}
    assert sandbox_processes() == []


def test_threads_taking_turns_run_no_more_sandboxes_at_once_than_the_turns():
    """Three threads share two turns (the threads backend has one thread more than sandboxes): each job
    spans 0.4 s, and no instant sees three of them running."""
    import threading
    sleeper = job("import time\ndef probe():\n    start = time.time()\n    time.sleep(0.4)\n    return [start, time.time()]\n")
    turns, spans = threading.BoundedSemaphore(2), []

    def grade():
        with sandbox.taking_turns(turns):
            spans.append(result(sandbox.run(sleeper)))
    threads = [threading.Thread(target=grade) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(spans) == 3
    assert max(sum(start <= at < end for start, end in spans) for at, _ in spans) == 2


def test_lines_that_answer_no_request_are_skipped_and_cannot_hold_a_test():
    """The student's code writes to every descriptor: stray lines and a forged answer without the request's
    number are skipped (the real answer counts); lines written without end stop the test at its time."""
    flooding = job("""
        import json, os, time
        def _spray(line):
            for fd in range(3, 64):
                try:
                    os.write(fd, line)
                except OSError:
                    pass
        calls = []
        def probe():
            calls.append(1)
            if len(calls) == 1:
                _spray(b"junk\\n" + json.dumps({"result": 41, "mutated": []}).encode() + b"\\n")
                return 42
            end = time.monotonic() + 30
            while time.monotonic() < end:
                _spray(b"junk\\n" * 100)
    """, tests=2)
    start = time.monotonic()
    report = sandbox.run(flooding, sandbox.Limits(test_s=2, notebook_s=20))
    assert statuses(report) == {"t0": "done", "t1": "timeout"} and result(report) == 42
    assert time.monotonic() - start < 10


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


# --- issue 16: what crosses namespaces, what a job as a whole may spend, and the probe's claims ---

PRIVATE = [str(REPO / "solutions"), "/etc/shadow"]
WEAKENINGS = {  # one weakening of the sandbox: the claims the probe must then report failed
    "readonly_root": ["read-only root"],
    "readonly_job": ["read-only /job"],
    "file_size_limit": ["file-size limit"],
    "distinct_uids": ["a distinct uid per concurrent job"],
    "net_namespace": ["no network (not even the host's loopback)", "no network interface but loopback"],
    "ipc_namespace": ["own ipc namespace"],
    "tmp_size": ["/tmp size limit"],
    "cgroup": ["job cgroup caps in force"],
    "keyring": ["private keyring"],
    "seccomp": ["seccomp filter loaded", "closed system calls refused"],
    "hide_host_paths": ["no host path visible"],
}


def add_key(description: str, keyring: int) -> int:
    """add_key(2) of a "user" key; the key's id, or -errno."""
    from mha_grader import kernel
    payload = b"stand-in credential"
    number = kernel.syscall_number("add_key")
    result = kernel.LIBC.syscall(ctypes.c_long(number), b"user", description.encode(), payload,
                                 ctypes.c_size_t(len(payload)), ctypes.c_long(keyring))
    return result if result >= 0 else -ctypes.get_errno()


@pytest.fixture(scope="module")
def grader_session_key():
    """The grader in a session keyring holding a key (as under a PAM login or a systemd service);
    the fork servers restart so that they inherit it."""
    from mha_grader import kernel
    sandbox.stop_servers()
    kernel.keyctl(kernel.KEYCTL_JOIN_SESSION_KEYRING, 0)
    assert add_key("mha-grader-canary", -3) > 0  # KEY_SPEC_SESSION_KEYRING
    yield
    sandbox.stop_servers()


def test_the_probe_passes_the_full_sandbox_even_in_a_session_keyring(grader_session_key):
    assert sandbox.probe(PRIVATE, sandbox.python_prefixes()) == []


@pytest.mark.parametrize("weakening", sorted(WEAKENINGS))
def test_the_probe_reports_each_weakening_of_the_sandbox(weakening, grader_session_key):
    """The probe's mutation test: one protection off at a time, and the probe names that claim."""
    problems = sandbox.probe(PRIVATE, sandbox.python_prefixes(), hardening=sandbox.Hardening(**{weakening: False}))
    failed = {p.split(": failed")[0] for p in problems}
    assert set(WEAKENINGS[weakening]) <= failed, problems
    assert all("; to fix: " in p for p in problems), problems


def test_the_probe_reports_a_memory_cap_above_the_machines_memory():
    problems = sandbox.probe(PRIVATE, sandbox.python_prefixes(), limits=sandbox.Limits(notebook_s=20, memory=1 << 40))
    assert any(p.startswith("memory cap: failed") for p in problems), problems
    assert any(p.startswith("memory limit per process") for p in problems), problems


def test_every_weakening_the_sandbox_can_be_given_is_in_the_mutation_test():
    assert {f.name for f in dataclasses.fields(sandbox.Hardening)} == set(WEAKENINGS)


KEYS = '''
import ctypes, os
LIBC = ctypes.CDLL(None, use_errno=True)

def probe():
    payload = b"planted"
    planted = LIBC.syscall(ctypes.c_long({add_key}), b"user", b"mha-planted", payload, ctypes.c_size_t(7),
                           ctypes.c_long(-4))  # into KEY_SPEC_USER_KEYRING, kept by the kernel per uid
    planted = planted if planted >= 0 else -ctypes.get_errno()
    return os.getuid(), planted, open("/proc/keys").read()
'''


def test_a_key_planted_by_one_job_is_not_seen_by_the_next_of_the_same_uid():
    from mha_grader import kernel
    cells = KEYS.format(add_key=kernel.syscall_number("add_key"))
    uid, planted, _ = result(sandbox.run(job(cells), hardening=sandbox.Hardening(seccomp=False)))
    assert planted > 0  # without the filter, the key is there: the next job's start must clear it
    uid2, refused, keys = result(sandbox.run(job(cells)))
    assert uid2 == uid
    assert refused == -errno.ENOSYS
    assert "mha-planted" not in keys and "stand-in" not in keys, keys


def test_a_job_does_not_see_the_graders_session_keyring(grader_session_key):
    keys = result(sandbox.run(job("def probe():\n    return open('/proc/keys').read()\n")))
    assert "mha-grader-canary" not in keys, keys
    assert all(line.split()[5] != "0" for line in keys.splitlines()), keys  # nothing of root's in view


def test_every_closed_system_call_is_refused_and_threads_and_forks_still_work():
    from mha_grader import kernel
    numbers = {n: kernel.syscall_number(n) for n in kernel.CLOSED if kernel.syscall_number(n) is not None}
    report = sandbox.run(job(f"""
        import ctypes, os, threading
        LIBC = ctypes.CDLL(None, use_errno=True)
        def probe():
            got = {{}}
            for name, number in {numbers!r}.items():
                result = LIBC.syscall(ctypes.c_long(number), *[ctypes.c_long(0)] * 6)
                if result == 0 and name == "clone3":
                    os._exit(0)
                got[name] = -ctypes.get_errno() if result < 0 else result
            for flag in {list(kernel.NEW_NAMESPACES)!r}:
                result = LIBC.syscall(ctypes.c_long({kernel.syscall_number("clone")}), ctypes.c_long(flag | 17),
                                      *[ctypes.c_long(0)] * 5)
                if result == 0:
                    os._exit(0)
                got[f"clone {{flag:#x}}"] = -ctypes.get_errno() if result < 0 else result
            ran = []
            thread = threading.Thread(target=lambda: ran.append(1))
            thread.start()
            thread.join()
            pid = os.fork()
            if pid == 0:
                os._exit(7)
            return sorted(got.items()), ran, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    """))
    got, ran, forked = result(report)
    got = dict(got)
    assert {name: code for name, code in got.items() if code != -errno.ENOSYS} == {}
    assert len(got) == len(numbers) + len(kernel.NEW_NAMESPACES)
    assert ran == [1] and forked == 7


def test_no_host_path_shows_inside():
    report = sandbox.run(job("""
        def probe():
            return [open(p, "rb").read().decode(errors="replace")
                    for p in ("/proc/1/cmdline", "/proc/self/mountinfo", "/proc/self/cgroup")]
    """))
    cmdline, mountinfo, groups = result(report)
    host = [str(REPO), tempfile.gettempdir() + "/mha-job", *sandbox.python_prefixes()]
    for text in (cmdline, mountinfo, groups):
        assert not [path for path in host if path in text], text
    assert cmdline.rstrip("\0") == "mha-sandbox"
    assert all(line.endswith(":/") for line in groups.splitlines()), groups


MANY_PROCESSES = '''
import os, time

def probe(each):
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            block = bytearray(each)  # zeroed, so every page is touched
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    return [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
'''


def test_one_job_of_many_processes_cannot_hold_more_than_the_memory_cap():
    """Four processes of 400 MB each, each below the per-process limit, 1.6 GB against a 1 GB cap."""
    the_job = job(MANY_PROCESSES)
    the_job["tests"][0]["cases"][0].update(names=["each"], specs=[400 << 20])
    report = sandbox.run(the_job, sandbox.Limits(memory=1 << 30, test_s=20))
    codes = result(report)
    assert -9 in codes, codes  # the kernel's OOM killer, within the job's cgroup
    assert report.usage["oom_kills"] >= 1 and report.usage["memory_peak"] <= 1 << 30, report.usage
    assert report.usage["removed"]


def test_a_fork_and_spin_job_cannot_use_more_cpu_than_its_cap():
    """Four spinning processes for 2 s of wall time: at most one core's worth (2 CPU s) in all."""
    report = sandbox.run(job("""
        import os
        def probe():
            for _ in range(3):
                if os.fork() == 0:
                    break
            while True:
                pass
    """), sandbox.Limits(test_s=2, notebook_s=10, cpus=1.0))
    assert statuses(report)["t0"] == "timeout"
    assert report.usage["cpu_s"] <= 2 * 1.0 + 0.5, report.usage  # (the cap plus the job's start and end)
    assert sandbox_processes() == []


THROUGH = """
import json, sys
sys.path.insert(0, {repo!r})
from mha_grader import sandbox
from mha_checks import calling
report = sandbox.run(json.loads({job!r}))
outcome = [r["outcome"] for r in report.records if "outcome" in r]
print(json.dumps([sys.prefix, calling.decode(outcome[0]["result"]) if outcome and "result" in outcome[0]
                  else [report.records, report.stderr], sandbox.probe({private!r}, sandbox.python_prefixes())]))
"""


@pytest.mark.parametrize("how", ["a link", "a folder"])
def test_a_venv_under_tmp_works_inside(how, tmp_path):
    """The checkout's venv reached through a link in /tmp, or living in /tmp (bound there in a mount
    namespace of its own): a module the fork server had not loaded still imports, the probe passes."""
    venv = Path(tempfile.mkdtemp(prefix="mha-venv-")) / "venv"
    the_job = job("import packaging.version\ndef probe():\n    return str(packaging.version.Version('1.2'))\n")
    script = tmp_path / "through.py"
    script.write_text(THROUGH.format(repo=str(REPO), job=json.dumps(the_job), private=PRIVATE))
    python = f"{venv}/bin/python {script}"
    if how == "a link":
        venv.symlink_to(Path(sys.prefix).resolve())
        command = ["sh", "-c", python]
    else:
        venv.mkdir()
        command = ["unshare", "--mount", "sh", "-c", f"mount --make-rprivate / && mount --bind {sys.prefix} {venv} "
                   f"&& {python}"]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        if venv.is_symlink():
            venv.unlink()
        else:
            venv.rmdir()
        venv.parent.rmdir()
    prefix, imported, problems = json.loads(out.stdout.splitlines()[-1])
    assert prefix == str(venv) and imported == "1.2"
    assert problems == []


def test_slot_locks_are_private_and_never_followed_through_a_link(tmp_path, monkeypatch):
    folder = sandbox.slot_folder()
    info = os.lstat(folder)
    assert not str(folder).startswith(tempfile.gettempdir()) and info.st_uid == os.geteuid()
    assert info.st_mode & 0o777 == 0o700
    planted = tmp_path / "slots"
    planted.mkdir(mode=0o700)
    (planted / "0.lock").symlink_to(tmp_path / "target")
    monkeypatch.setattr(sandbox, "slot_folder", lambda: planted)
    with pytest.raises(OSError) as err:
        sandbox._slot()
    assert err.value.errno == errno.ELOOP
    assert not (tmp_path / "target").exists()


def test_the_feedback_names_the_jobs_memory_cap_when_its_cgroup_killed_a_process():
    from mha_grader import judging
    limits = sandbox.Limits(memory=1 << 30)
    killed = judging._no_outcome({"status": ("signal", 9)}, sandbox.Report(usage={"oom_kills": 1}), limits)
    assert "more memory than the limit allows (1024 MB for all the processes" in killed
    other = judging._no_outcome({"status": ("signal", 9)}, sandbox.Report(usage={"oom_kills": 0}), limits)
    assert other.endswith(judging.SIGNALS[9] + ".")


def test_a_cgroup_v2_job_group_is_set_up_and_read_back_in_the_v2_files(tmp_path, monkeypatch):
    """This machine's cgroups are v1 (hybrid): the v2 files are checked on a stand-in folder tree."""
    from mha_grader import cgroups
    own = tmp_path / "grader.scope"
    own.mkdir()
    (own / "cgroup.subtree_control").write_text("cpu memory pids\n")
    monkeypatch.setattr(cgroups, "layout", lambda: ("v2", {"": str(own)}))
    group = cgroups.JobGroup("mha-job-7", cgroups.Caps(memory=3 << 30, processes=48, cpus=0.5)).create()
    folder = own / "mha-job-7"
    assert (folder / "memory.max").read_text() == str(3 << 30)
    assert (folder / "pids.max").read_text() == "48" and (folder / "cpu.max").read_text() == "50000 100000"
    for name, text in {"memory.peak": "123456", "memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
                       "pids.events": "max 2\n", "cpu.stat": "usage_usec 2500000\nnr_throttled 9\n"}.items():
        (folder / name).write_text(text)
    assert group.usage() == {"cgroup": "v2", "memory_max": 3 << 30, "memory_peak": 123456, "oom_kills": 1,
                             "pids_max": 48, "forks_refused": 2, "cpus": 0.5, "cpu_s": 2.5, "throttled": 9}
