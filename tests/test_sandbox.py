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
from mha_grader.walls import kernel, probing, sandbox

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
    assert probing.probe(private[:2] + ["/etc/shadow"], sandbox.python_prefixes()) == []


def test_probe_reports_what_the_unsafe_mode_exposes():
    problems = probing.probe([str(REPO / "solutions")], [], unsafe=True)
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
        if os.fork() == 0:
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
    """Test 0 exits the process, 1 hangs ignoring signals, 2 forks a sleeper and a fork bomb (setsid, to leave
    the process group, is refused by the filter: no job needs it),
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
    sleeper = job("import os, time\ndef probe():\n    if os.fork() == 0:\n        time.sleep(1000)\n"
                  "    time.sleep(1000)\n")
    script.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(REPO)!r})
        from mha_grader.walls import sandbox
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
    leaves running is killed before the next; a test that ends the process costs that test alone (run
    again once in a new process, where it ends the same way: it was charged for its own doing), and
    the next one starts in a new process that runs the cells again."""
    counting = job("""
        import os, time
        with open("/tmp/runs", "a") as fh:
            fh.write("x")
        calls = []
        def living():
            pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
            return [p for p in pids if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
        def probe(test):
            calls.append(1)
            if test == 1 and os.fork() == 0:
                time.sleep(1000)
            if test == 3:
                os._exit(3)
            return [open("/tmp/runs").read().count("x"), len(calls), len(living())]
    """)
    counting["tests"] = [{"id": f"t{i}", "cases": [{"function": "probe", "names": ["test"], "specs": [i]}]}
                         for i in range(5)]
    report = sandbox.run(counting)
    assert statuses(report) == {"t0": "done", "t1": "done", "t2": "done", "t3": "exit", "t4": "done"}
    got = {test: calling.decode(outcome["result"]) for test, outcome in outcomes(report).items()}
    assert got == {"t0": [1, 1, 0], "t1": [1, 2, 1], "t2": [1, 3, 0], "t4": [3, 1, 0]}  # t3 ran the cells again
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
    "net_namespace": ["own net namespace", "no network interface but loopback"],  # (no socket opens either way)
    "ipc_namespace": ["own ipc namespace"],
    "tmp_size": ["/tmp size limit"],
    "cgroup": ["job cgroup caps in force"],
    "keyring": ["private keyring"],
    "seccomp": ["seccomp filter loaded", "system calls outside the allowlist refused"],
    "hide_host_paths": ["no host path visible"],
    "harness_uid": ["pid 1 under another uid than the student's code"],
    "syscall_allowlist": ["system calls outside the allowlist refused", "no lock or watch on the host's files"],
    "foreign_arch_kills": ["calls of another architecture kill the job"],
    "socket_families": ["no socket opens, of any family"],
    "pid_1_rule": ["the filter refuses every call aimed at pid 1 (ENOSYS)"],  # (the uids alone keep it out of reach:
}                                                                          # the kernel's EPERM is not the filter's)
ADDED = ("getppid", "ptrace", "io_uring_setup")  # a call added to the filter's list: harmless, then two that are not


def add_key(description: str, keyring: int) -> int:
    """add_key(2) of a "user" key; the key's id, or -errno."""
    from mha_grader.walls import kernel
    payload = b"stand-in credential"
    number = kernel.syscall_number("add_key")
    result = kernel.LIBC.syscall(ctypes.c_long(number), b"user", description.encode(), payload,
                                 ctypes.c_size_t(len(payload)), ctypes.c_long(keyring))
    return result if result >= 0 else -ctypes.get_errno()


@pytest.fixture(scope="module")
def grader_session_key():
    """The grader in a session keyring holding a key (as under a PAM login or a systemd service);
    the fork servers restart so that they inherit it."""
    from mha_grader.walls import kernel
    sandbox.stop_servers()
    kernel.keyctl(kernel.KEYCTL_JOIN_SESSION_KEYRING, 0)
    assert add_key("mha-grader-canary", -3) > 0  # KEY_SPEC_SESSION_KEYRING
    yield
    sandbox.stop_servers()


def test_the_probe_passes_the_full_sandbox_even_in_a_session_keyring(grader_session_key):
    assert probing.probe(PRIVATE, sandbox.python_prefixes()) == []


@pytest.mark.parametrize("weakening", sorted(WEAKENINGS))
def test_the_probe_reports_each_weakening_of_the_sandbox(weakening, grader_session_key):
    """The probe's mutation test: one protection off at a time, and the probe names that claim."""
    problems = probing.probe(PRIVATE, sandbox.python_prefixes(), hardening=sandbox.Hardening(**{weakening: False}))
    failed = {p.split(": failed")[0] for p in problems}
    assert set(WEAKENINGS[weakening]) <= failed, problems
    assert all("; to fix: " in p for p in problems), problems


def test_the_probe_reports_a_signal_that_lands_on_pid_1_when_both_its_layers_are_off():
    """Either layer alone keeps pid 1 out of reach (each single weakening above leaves these claims
    holding); with both off, the student's signals land on pid 1's handlers and its limit can be changed,
    and the probe says so."""
    problems = probing.probe(PRIVATE, sandbox.python_prefixes(),
                             hardening=sandbox.Hardening(seccomp=False, harness_uid=False))
    failed = {p.split(": failed")[0]: p for p in problems}
    assert "no signal from the student's code lands on pid 1" in failed, problems
    assert "SIGINT" in failed["no signal from the student's code lands on pid 1"]
    reached = failed["no signal, limit, trace or OOM score of pid 1 within reach"]
    assert "kill(1, SIGINT)" in reached and "prlimit64(1, RLIMIT_NOFILE) set" in reached, reached


def test_the_probe_reports_a_memory_cap_above_the_machines_memory():
    problems = probing.probe(PRIVATE, sandbox.python_prefixes(), limits=sandbox.Limits(notebook_s=20, memory=1 << 40))
    assert any(p.startswith("memory cap: failed") for p in problems), problems
    assert any(p.startswith("memory limit per process") for p in problems), problems


@pytest.mark.parametrize("added", ADDED)
def test_the_probe_reports_a_call_added_to_the_filters_list(added):
    """Issue 36: the probe sweeps every call outside its own list (inside/probe.py's MAY_MAKE, written apart
    from kernel.ALLOWED), so a call admitted by the filter alone is seen (getppid was not: a call that worked
    was taken for the kernel's own answer)."""
    problems = probing.probe(PRIVATE, sandbox.python_prefixes(), hardening=sandbox.Hardening(also_admit=(added,)))
    failed = {p.split(": failed")[0]: p for p in problems}
    assert added in failed.get("system calls outside the allowlist refused", ""), problems


def _opened(call: str) -> list[str]:
    return ["call forms outside the allowlist refused"] + (
        ["the filter refuses every call aimed at pid 1 (ENOSYS)"] if call in ("kill", "tgkill", "prlimit64") else [])


@pytest.mark.parametrize("call", kernel.argument_ruled())
def test_the_probe_reports_each_argument_rule_of_the_filter_dropped(call):
    """Issue 36: each call the filter admits in some forms only, admitted whole instead: the probe tries the
    forms that must be refused and wants the filter's own answer (ENOSYS), not the kernel's (EPERM, ENOTTY)."""
    problems = probing.probe(PRIVATE, sandbox.python_prefixes(), hardening=sandbox.Hardening(argument_rules=(call,)))
    failed = {p.split(": failed")[0] for p in problems}
    assert set(_opened(call)) <= failed, problems


def test_every_weakening_the_sandbox_can_be_given_is_in_the_mutation_test():
    switches = {f.name for f in dataclasses.fields(sandbox.Hardening) if f.type in (bool, "bool")}
    assert switches == set(WEAKENINGS)
    assert {f.name for f in dataclasses.fields(sandbox.Hardening)} - switches == set(kernel.FILTER_WEAKENINGS)
    assert set(kernel.argument_ruled()) >= {"clone", "kill", "tgkill", "prlimit64", "setresuid", "fcntl"}


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
    from mha_grader.walls import kernel
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


REFUSED = ("keyctl", "add_key", "io_uring_setup", "userfaultfd", "bpf", "perf_event_open", "ptrace",
           "process_vm_writev", "pidfd_getfd", "unshare", "setns", "clone3", "mount", "open_tree", "fsopen", "open_by_handle_at",
           "init_module", "kexec_load", "syslog", "execve", "flock", "inotify_init1", "fanotify_init", "connect")
UNNAMED = (457, 458, 462, 467, 470, 500, 1000)  # statmount, listmount, mseal, open_tree_attr on x86-64; no call yet


def test_calls_outside_the_allowlist_are_refused_named_or_not_and_threads_and_forks_still_work():
    """A sample of calls no job needs, by name and by number (libseccomp 2.5.4 names none of the
    numbers: they are refused by the default action, as any later call will be)."""
    from mha_grader.walls import kernel
    numbers = {n: kernel.syscall_number(n) for n in REFUSED} | {f"#{n}": n for n in UNNAMED}
    assert None not in numbers.values() and not set(REFUSED) & set(kernel.ALLOWED)
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


def test_the_filter_admits_no_call_it_does_not_list(tmp_path):
    """Closed by construction: the calls the built filter admits (read back from libseccomp's own
    rendering of it) are exactly the listed ones and the argument forms, and its defaults refuse."""
    from mha_grader.walls import kernel
    rules = kernel.build_filter(dict.fromkeys(kernel.FILTER_SWITCHES, True), (sandbox.UID_BASE, sandbox.JOBS))
    with open(tmp_path / "filter.pfc", "w+") as fh:
        rules.export_pfc(fh)
    pfc = (tmp_path / "filter.pfc").read_text()
    named = {line.split('"')[1] for line in pfc.splitlines() if "# filter for syscall" in line}
    ruled = {kernel.syscall_name(n) for n in kernel.ruled_numbers()}
    assert named == ruled and set(kernel.ALLOWED) <= named, named ^ ruled
    assert "# default action\n  action ERRNO(38);" in pfc  # ENOSYS for every call without a rule
    assert "# invalid architecture action\naction KILL_PROCESS;" in pfc  # (i386's int 0x80, x32's numbers)


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
from mha_grader.walls import probing, sandbox
from mha_checks import calling
report = sandbox.run(json.loads({job!r}))
outcome = [r["outcome"] for r in report.records if "outcome" in r]
print(json.dumps([sys.prefix, calling.decode(outcome[0]["result"]) if outcome and "result" in outcome[0]
                  else [report.records, report.stderr], probing.probe({private!r}, sandbox.python_prefixes())]))
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
    from mha_grader.trusted import judging
    limits = sandbox.Limits(memory=1 << 30)
    killed = judging._no_outcome({"status": ("signal", 9)}, sandbox.Report(usage={"oom_kills": 1}), limits)
    assert "more memory than the limit allows (1024 MB for all the processes" in killed
    other = judging._no_outcome({"status": ("signal", 9)}, sandbox.Report(usage={"oom_kills": 0}), limits)
    assert other.endswith(judging.SIGNALS[9] + ".")


def test_a_cgroup_v2_job_group_is_set_up_and_read_back_in_the_v2_files(tmp_path, monkeypatch):
    """This machine's cgroups are v1 (hybrid): the v2 files are checked on a stand-in folder tree."""
    from mha_grader.walls import cgroups
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


# --- issue 25: the allowlist's needs, pid 1 out of reach, the probe's new claims ----------------

def everyday_job(source: str, torch: bool = False) -> dict:
    return {"torch": torch, "cells": [{"label": "c0", "source": textwrap.dedent(source)}],
            "tests": [{"id": f"t{i}", "cases": [{"function": "probe", "names": [], "specs": []}]} for i in range(2)]}


def test_everyday_library_uses_run_under_the_allowlist():
    """What the allowlist was measured on beyond the catalogues (tests/submissions/everyday.py): each runs
    to the end under the filter, both tests, and returns what it returns without it."""
    from submissions.everyday import EVERYDAY, EVERYDAY_TORCH
    patient = sandbox.Limits(test_s=40, test_cpu_s=40, notebook_s=90)  # (matplotlib builds its font cache: seconds)
    for cells, torch in ((EVERYDAY, False), (EVERYDAY_TORCH, True)):
        for name, source in cells.items():
            report = sandbox.run(everyday_job(source, torch), patient)
            weakened = sandbox.run(everyday_job(source, torch), patient, hardening=sandbox.Hardening(seccomp=False))
            assert statuses(report) == {"t0": "done", "t1": "done"}, (name, report.records)
            assert "result" in outcomes(report)["t0"], (name, report.records)
            assert result(report) == result(weakened) and result(report) not in (False, None), name


PID_1 = '''
import ctypes, os, resource, signal
LIBC = ctypes.CDLL(None, use_errno=True)

def _checked(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "refused")

def _refused(action):
    try:
        action()
    except OSError as err:
        return err.errno
    return 0

def probe(test):
    if test == 1:
        return sorted({
            "kill SIGINT": _refused(lambda: os.kill(1, signal.SIGINT)),
            "kill SIGTERM": _refused(lambda: os.kill(1, signal.SIGTERM)),
            "tgkill SIGINT": _refused(lambda: _checked(LIBC.syscall(ctypes.c_long(TGKILL), ctypes.c_long(1),
                                                                    ctypes.c_long(1), ctypes.c_long(signal.SIGINT)))),
            "prlimit NOFILE": _refused(lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3))),
            "prlimit read": _refused(lambda: resource.prlimit(1, resource.RLIMIT_NOFILE)),
            "oom_score_adj": _refused(lambda: open("/proc/1/oom_score_adj", "w").write("1000")),
            "mem": _refused(lambda: open("/proc/1/mem", "rb").read(1)),
            "signal.pidfd_send_signal": _refused(lambda: signal.pidfd_send_signal(os.pidfd_open(1), signal.SIGINT)),
        }.items())
    return "pid 1 still answers"
'''


@pytest.mark.parametrize("layer", ["both", "the uids alone", "the filter alone"])
def test_nothing_the_students_code_runs_reaches_pid_1(layer):
    """The issue's samples (os.kill(1, SIGINT) and prlimit on pid 1's RLIMIT_NOFILE) and their kin are
    refused, by each of the two layers on its own: pid 1's uid of its own, and the filter."""
    hardening = {"both": sandbox.Hardening(), "the uids alone": sandbox.Hardening(seccomp=False),
                 "the filter alone": sandbox.Hardening(harness_uid=False)}[layer]
    from mha_grader.walls import kernel
    the_job = job(f"TGKILL = {kernel.syscall_number('tgkill')}\n" + PID_1)
    the_job["tests"] = [{"id": f"t{i}", "cases": [{"function": "probe", "names": ["test"], "specs": [i]}]}
                        for i in range(3)]
    report = sandbox.run(the_job, hardening=hardening)
    assert statuses(report) == {"t0": "done", "t1": "done", "t2": "done"} and report.returncode == 0, report.records
    refused = dict(result(report, "t1"))
    assert len(refused) == 8 and {what: code for what, code in refused.items() if code == 0} == {}, refused
    assert result(report, "t2") == "pid 1 still answers"


def test_a_job_whose_pid_1_is_stopped_is_that_notebooks_failure_alone(tmp_path):
    """With both layers off, prlimit on pid 1 lands and the harness can open nothing more: the job ends
    with the harness's failure status (judging reads it as the sandbox's failure: retried, then "could
    not be graded" for that notebook alone, and `make grade` still exports, below) and nothing of it is
    left running."""
    lowers = job("import resource\ndef probe():\n    resource.prlimit(1, resource.RLIMIT_NOFILE, (4, 4))\n"
                 "    return 'lowered'\n", tests=2)
    report = sandbox.run(lowers, hardening=sandbox.Hardening(seccomp=False, harness_uid=False))
    assert report.returncode == sandbox.HARNESS_FAILED, (report.returncode, report.records, report.stderr)
    assert "Too many open files" in report.stderr
    assert sandbox_processes() == []


@pytest.mark.parametrize("exit_status, exported", [(0, True), (1, True), (3, False), (5, False)])
def test_make_grade_exports_what_was_graded_even_when_a_notebook_could_not_be(exit_status, exported, monkeypatch,
                                                                              capsys):
    """`make grade` runs the grader with --export: it runs `nbgrader export` after a run that graded (0) and after
    one where some notebook could not be graded (1, the README's exit status); not after a run that graded nothing
    (3: the sandbox does not isolate; 5: recording failed). Its exit status is the run's, or 8 when the export
    fails (tests/test_faults.py runs both for real)."""
    from types import SimpleNamespace
    from mha_grader.trusted import export, run, stopping
    calls = []
    for why, status in (("", exit_status), ("the gradebook is locked", 8 if exported else exit_status)):
        monkeypatch.setattr(export, "write", lambda root, stop, why=why: calls.append(root) or why)
        args = SimpleNamespace(export=True, argv=["--course", "c", "grade", "--export"])
        assert run._then_export(args, SimpleNamespace(root=Path("c")), stopping.Stop(), exit_status) == status
    assert len(calls) == (2 if exported else 0)
    assert run._then_export(SimpleNamespace(export=False), None, stopping.Stop(), exit_status) == exit_status
    assert ("Export again with: " in capsys.readouterr().err) == exported


def holder_of(uid: int) -> subprocess.Popen:
    """A process of this machine's that holds ``uid`` (as a stray user account's process would)."""
    proc = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(f"pid {proc.pid} " in h for h in probing.holders_of_sandbox_uids()):
        time.sleep(0.02)
    return proc


def test_the_probe_reports_a_host_process_holding_a_sandbox_uid(monkeypatch):
    """A process of the host running as a sandbox uid (a student's, a harness's) is found; the probe names it.
    (The stray lives a few hundredths of a second: other runs' probes on this machine would see it too.)"""
    for uid in (sandbox.UID_BASE, sandbox.UID_BASE + sandbox.SLOTS - 1):
        proc = holder_of(uid)
        try:
            found = probing.holders_of_sandbox_uids()
        finally:
            proc.kill()
            proc.wait()
        assert any(f"pid {proc.pid} (sleep) as uid/gid {uid}/{uid}" in h for h in found), found
    assert not any(f"pid {proc.pid} " in h for h in probing.holders_of_sandbox_uids())
    monkeypatch.setattr(probing, "holders_of_sandbox_uids", lambda: ["pid 4242 (sleep) as uid/gid 62465/62465"])
    problems = probing.probe(PRIVATE, sandbox.python_prefixes())
    assert [p.split(": failed")[0] for p in problems] == ["no other process holds a sandbox uid"], problems
    assert "pid 4242 (sleep)" in problems[0] and "; to fix: " in problems[0]


def test_the_fork_server_holds_no_listing_of_the_course(tmp_path):
    """A file put in the checkout (the course folder under `make grade`) before the fork servers start:
    no job finds its name anywhere in its memory's containers, and the import system caches no folder
    outside the Python installation and the job."""
    canary = REPO / f".listing-canary-{os.getpid()}"
    canary.write_text("")
    sandbox.stop_servers()
    try:
        for torch in (False, True):
            inside = tuple(p for _, paths in sandbox.prefix_paths() for p in paths) + ("/job",)
            report = sandbox.run(job(f"""
                import gc, sys
                def probe():
                    name = {canary.name[::-1]!r}[::-1]  # (never the name itself among its constants)
                    seen = [type(o).__name__ for o in gc.get_objects()
                            if isinstance(o, (set, frozenset, list, tuple, dict)) and name in o]
                    folders = [str(p) for p in [*sys.path_importer_cache, *sys.path]
                               if not str(p).startswith({inside!r})]
                    return seen, folders, len(sys.path_importer_cache)
            """, torch=torch))
            seen, folders, cached = result(report)
            assert seen == [] and folders == [] and cached > 0, (seen, folders)
    finally:
        canary.unlink()
        sandbox.stop_servers()


# --- issue 26: the harness is total: every way a test's process ends is a verdict for that test ---

FUZZ = '''
import ctypes, json, os, signal, sys, time
POINT, ENDING, ONCE = {point!r}, {ending!r}, {once!r}

class Odd(Exception):
    def __str__(self):
        raise RuntimeError("no words for it")

def _end():
    if ONCE:  # (only the first process that gets here: the next test's starts clean)
        if os.path.exists("/tmp/ended"):
            return
        open("/tmp/ended", "w").close()
    if ENDING == "exit 0":
        os._exit(0)
    if ENDING == "exit 3":
        os._exit(3)
    if ENDING == "SIGKILL":
        os.kill(os.getpid(), signal.SIGKILL)
    if ENDING == "SIGSEGV":
        ctypes.string_at(0)
    if ENDING == "hangs":
        time.sleep(1000)
    if ENDING == "closes its pipes":
        for fd in range(3, 64):
            try:
                os.close(fd)
            except OSError:
                pass
    if ENDING == "odd exception":
        raise Odd()

_write, _loads, _dumps = os.write, json.loads, json.dumps

def write(fd, data):  # the child's frames go through os.write
    if POINT == "after the cells' frame" and b'"seq": 0' in data:
        written = _write(fd, data)
        _end()
        return written
    if POINT == "half a frame" and b"END-HERE" in data:
        _write(fd, data[:len(data) // 2])
        _end()
        return len(data)
    if POINT == "after the frame" and b"END-HERE" in data:
        written = _write(fd, data)
        _end()
        return written
    return _write(fd, data)

def loads(text, *args, **kwargs):  # the child reads each request with json.loads
    value = _loads(text, *args, **kwargs)
    if POINT == "request read" and isinstance(value, dict) and value.get("specs") == [1]:
        _end()
    return value

def dumps(value, *args, **kwargs):  # and writes each answer with json.dumps
    if POINT == "answer made" and isinstance(value, dict) and "END-HERE" in repr(value.get("result")):
        _end()
    return _dumps(value, *args, **kwargs)

os.write, json.loads, json.dumps = write, loads, dumps

def probe(n):
    if n == 1 and POINT == "in the call":
        _end()
    return "END-HERE" if n == 1 else f"t{{n}}"

if POINT == "cells":
    _end()
'''
POINTS = ("cells", "after the cells' frame", "request read", "in the call", "answer made", "half a frame",
          "after the frame")
ENDINGS = ("exit 0", "exit 3", "SIGKILL", "SIGSEGV", "hangs", "closes its pipes", "odd exception")
FUZZ_LIMITS = sandbox.Limits(test_s=1.5, notebook_s=30)


def fuzz_verdicts(point: str, ending: str) -> tuple[tuple, tuple, tuple]:
    """The (status, detail) each of the three tests must get when the child ends at ``point`` by ``ending``
    (at the first two points, only the first process ends: test t0 is charged, t1 and t2 run clean; at
    the others the process ends wherever test t1 reaches the point, t0 and t2 run clean)."""
    done = ("done", 0)
    end = {"exit 0": ("exit", 0), "exit 3": ("exit", 3), "SIGKILL": ("signal", 9), "SIGSEGV": ("signal", 11),
           "hangs": ("timeout", 1.5), "closes its pipes": ("exit", 1), "odd exception": ("exit", 1)}[ending]
    if point == "cells":
        if ending == "hangs":
            return ("cells", 1.5), ("cells", 1.5), ("cells", 1.5)  # (the cells never finish: no test can run)
        return (done if ending == "odd exception" else end), done, done  # (the odd exception: a cell that raised)
    if point == "after the cells' frame":
        return end, done, done
    if point == "after the frame":
        hung = ending == "hangs"  # (t1 answered; a hung child answers no more)
        return done, done, (("timeout", 1.5) if hung else done)
    if ending == "odd exception" and point in ("in the call", "answer made"):
        return done, done, done  # (an error the harness describes without words: the test gets an outcome)
    return done, end, done


@pytest.mark.parametrize("point", POINTS)
def test_every_end_of_a_tests_process_is_a_verdict_for_that_test_alone(point):
    """The fuzz: the child ends at each point of the protocol, in each way (an exit of any status, a signal,
    a hang, closed pipes, an exception whose formatting raises); the test gets its verdict, the tests around
    it run clean, pid 1 lives on (exit status 0) and the records are the harness's, whole."""
    from mha_grader.trusted import frames
    for ending in ENDINGS:
        the_job = job(FUZZ.format(point=point, ending=ending, once=point in ("cells", "after the cells' frame")))
        the_job["tests"] = [{"id": f"t{i}", "cases": [{"function": "probe", "names": ["n"], "specs": [i]}]}
                            for i in range(3)]
        report = sandbox.run(the_job, FUZZ_LIMITS)
        assert report.returncode == 0, (point, ending, report.returncode, report.stderr)
        events = frames.events(report.records, the_job)  # (whole and valid: one status per test)
        got = tuple(events[f"t{i}"]["status"] for i in range(3))
        assert got == fuzz_verdicts(point, ending), (point, ending, report.records)
        for i, (status, _) in enumerate(got):
            if status == "done":
                outcome = events[f"t{i}"]["cases"][0]
                undescribed = {"in the call": "an exception", "answer made": "an outcome"}.get(point) \
                    if ending == "odd exception" and i == 1 else None
                if undescribed:
                    assert outcome["error"]["type"] == undescribed, (point, ending, outcome)
                else:
                    assert calling.decode(outcome["result"]) == ("END-HERE" if i == 1 else f"t{i}"), (point, ending)
        assert sandbox_processes() == []


def test_every_verdict_of_the_harness_has_words_for_the_student():
    """Each status the fuzz can end in (an exit of status 0 included) has a sentence of its own."""
    from mha_grader.trusted import judging
    limits = sandbox.Limits()
    said = {judging._no_outcome({"status": status}, sandbox.Report(), limits)
            for status in (("exit", 0), ("exit", 3), ("signal", 9), ("signal", 11), ("timeout", 1.5), ("cells", 1.5))}
    assert len(said) == 6 and all(s.endswith(".") for s in said), said
    assert any("exit status 0" in s for s in said)


# --- issue 28: the same submission gets the same numbers at every grading ---

RANDOM = """
import random
import numpy as np
def probe():
    return [random.random(), float(np.random.rand()), float(np.random.normal(size=3).sum())]
"""
RANDOM_TORCH = """
import random
import numpy as np
import torch
def probe():
    x = torch.ones(64)
    return [random.random(), float(np.random.rand()), float(torch.nn.functional.dropout(x, 0.5).sum()),
            float(torch.randn(3).sum())]
"""


def test_a_job_that_draws_random_numbers_draws_the_same_ones_at_every_grading():
    """Python's, NumPy's and torch's generators are seeded from the job: the same job, the same numbers
    (a test that ends its process and runs again in a new one draws from the start again); another job
    (other inputs, or other cells), other numbers."""
    for cells, torch in ((RANDOM, False), (RANDOM_TORCH, True)):
        first, again = (sandbox.run(job(cells, tests=2, torch=torch)) for _ in range(2))
        assert outcomes(first) == outcomes(again) and len(outcomes(first)) == 2
        other = sandbox.run(job(cells + "# another submission\n", tests=2, torch=torch))
        assert result(other) != result(first)
        assert outcomes(first)["t0"] != outcomes(first)["t1"]  # (one generator, drawn on from test to test)


def test_two_gradings_of_a_submission_that_draws_random_numbers_give_the_same_bytes(tmp_path):
    """A student whose answers draw random numbers (NumPy's and Python's generators in exercise 1,
    torch's dropout in exercise 5), graded twice by the grading command: the same scores, the same
    stored results (their timings aside) and the same feedback pages, byte for byte. (Graded with the
    static rule off: what is tested is the sandbox's seeding, not which code is admitted.)"""
    from submissions import kit
    course = kit.make_course(tmp_path / "course")
    right = kit.solution_cells("05_assembly")["multi_head_attention"].replace(
        "def multi_head_attention(", "def _right(", 1)
    noisy = {"01_project": {"project": "def project(x, w, b=None):\n    import random\n"
                                       "    out = x @ w + (0 if b is None else b)\n"
                                       "    return out + np.random.normal(0, 0.1, out.shape) * random.random()\n"},
             "05_assembly": {"multi_head_attention": right + "\ndef multi_head_attention(query, key, value, mha, "
                             "causal=False):\n    out, weights = _right(query, key, value, mha, causal)\n"
                             "    return torch.nn.functional.dropout(out, 0.5), weights\n"}}
    kit.submit(course, "noisy", {notebook: kit.filled(course, notebook, cells) for notebook, cells in noisy.items()})
    timings = ("seconds", "sandbox_s")
    gradings = []
    for _ in range(2):
        run = kit.grade(course, "--force", "--workers", "1", rule=False)
        assert run.returncode == 0, run.stdout + run.stderr
        results = {p.name: {k: v for k, v in json.loads(p.read_text()).items() if k not in timings}
                   for p in (course / "autograded" / "noisy" / kit.ASSIGNMENT).glob("*.result.json")}
        pages = {p.name: p.read_bytes() for p in (course / "feedback" / "noisy" / kit.ASSIGNMENT).glob("*.html")}
        gradings.append((kit.scores(course)["noisy"], results, pages))
    assert set(gradings[0][1]) >= {"01_project.result.json", "05_assembly.result.json"}
    assert gradings[0][0] == gradings[1][0] and gradings[0][1] == gradings[1][1]
    assert gradings[0][2] == gradings[1][2] and len(gradings[0][2]) >= 2
    project = [t["message"] for t in gradings[0][1]["01_project.result.json"]["tests"]]
    assert sum("wrong values in the result" in m for m in project) >= 2, project  # (the noise is quoted)
    assert any(t["score"] == 0 for t in gradings[0][1]["05_assembly.result.json"]["tests"])  # (and dropped out)


# --- issue 35: a test's time is the student's own, whatever the machine does ---

SLEEPS = "import time\ndef probe():\n    time.sleep(1000)\n"
SPINS = "def probe():\n    while True:\n        pass\n"
WORKS_A_SECOND = "import time\ndef probe():\n    t = time.process_time()\n    while time.process_time() < t + 1:\n        pass\n" \
                 "    return 'done'\n"


def time_of(report: sandbox.Report, test: str = "t0") -> dict:
    return next(r["time"] for r in report.records if r.get("test") == test and "status" in r)


def paused_while(run, after: float, seconds: float):
    """``run()``, with every process of the job it starts (pid 1 too) SIGSTOPped from outside for ``seconds``,
    ``after`` seconds into the job: as a paused machine would (only the processes of this process's jobs)."""
    import threading
    done = threading.Event()

    def pause():
        if done.wait(after):
            return
        held = [pid for pid in _descendants(os.getpid())
                if sandbox.UID_BASE <= os.stat(f"/proc/{pid}").st_uid < sandbox.UID_BASE + sandbox.SLOTS]
        for pid in held:
            os.kill(pid, 19)  # SIGSTOP
        time.sleep(seconds)
        for pid in held:
            os.kill(pid, 18)  # SIGCONT
    pauser = threading.Thread(target=pause)
    pauser.start()
    try:
        return run()
    finally:
        done.set()
        pauser.join()


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def test_the_cgroup_count_is_read_in_either_layout(tmp_path):
    """The count pid 1 reads a test's CPU time from: cgroup v1's cpuacct.usage and cgroup v2's cpu.stat (a group
    of the unified hierarchy, where this hybrid host has one), each read through an open descriptor as the job
    reads it, after a child spun 0.3 s of CPU in the group."""
    from mha_grader.inside import clock
    from mha_grader.walls import cgroups
    mounts, own = cgroups._mounts(), cgroups._own_groups()
    groups = {"v1": (os.path.join(mounts["cpuacct"] + own["cpuacct"], f"mha-test-{os.getpid()}"), "cpuacct.usage")} \
        if "cpuacct" in mounts else {}
    if "cgroup2" in mounts and "" in own:
        groups["v2"] = (os.path.join(mounts["cgroup2"] + own[""], f"mha-test-{os.getpid()}"), "cpu.stat")
    assert groups, "no cgroup hierarchy counts CPU time here"
    for layout, (folder, name) in groups.items():
        os.mkdir(folder)
        try:
            pid = os.fork()
            if pid == 0:
                with open(os.path.join(folder, "cgroup.procs"), "w") as fh:
                    fh.write("0")
                start = time.process_time()
                while time.process_time() < start + 0.3:
                    pass
                os._exit(0)
            os.waitpid(pid, 0)
            count = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                assert 0.29 <= clock.counted(count) < 1.0, layout
                assert clock.counted(count) == clock.counted(count), layout  # (read anew each time, from the start)
            finally:
                os.close(count)
        finally:
            os.rmdir(folder)


def test_a_tests_limit_is_its_own_cpu_or_waiting_time_and_says_its_seconds():
    """Code that sleeps is stopped after its own seconds of waiting, code that spins after as many CPU
    seconds; each stop says the limit (a real N, never None) and the seconds it reports add up to it."""
    limits = sandbox.Limits(test_s=1.5, notebook_s=10)
    slept, spun = sandbox.run(job(SLEEPS), limits), sandbox.run(job(SPINS), limits)
    assert [r["detail"] for r in slept.records + spun.records if r.get("status") == "timeout"] == [1.5, 1.5]
    assert time_of(slept)["own"] >= 1.5 and time_of(slept)["cpu"] < 0.5
    assert max(time_of(spun)["cpu"], time_of(spun)["own"]) >= 1.5 and time_of(spun)["cpu"] >= 1.2, time_of(spun)


def test_a_paused_job_is_not_charged_for_its_pause():
    """The whole job (pid 1 and the student's process) SIGSTOPped from outside for 4 s: a sleeping test is still
    stopped after its own 2 s of waiting (4 s more of wall-clock time: the pause is not counted), and an honest
    second of work, paused half way, still finishes (its time was 1.5 s)."""
    limits = sandbox.Limits(test_s=1.5, notebook_s=10)
    slept = paused_while(lambda: sandbox.run(job(SLEEPS), sandbox.Limits(test_s=2, notebook_s=10)), 1.0, 4)
    assert statuses(slept) == {"t0": "timeout"}
    spent = time_of(slept)
    assert spent["own"] < 2.5 and spent["wall"] >= spent["own"] + 3.5, spent
    worked = paused_while(lambda: sandbox.run(job(WORKS_A_SECOND), limits), 0.6, 4)
    assert statuses(worked) == {"t0": "done"} and result(worked) == "done", worked.records
    assert time_of(worked)["wall"] >= 4, time_of(worked)


def test_a_starved_job_is_given_its_own_time():
    """Beside 8 neighbours (busy sessions) a job's code gets a fraction of a core: a second of work in a 1.5 s
    test takes longer than 1.5 s of wall-clock time, and finishes; its CPU time is what it used."""
    from neighbours import Neighbours
    with Neighbours(sessions=8, processes=2):
        time.sleep(1)
        report = sandbox.run(job(WORKS_A_SECOND), sandbox.Limits(test_s=1.5, notebook_s=10))
    assert statuses(report) == {"t0": "done"} and result(report) == "done", report.records
    spent = time_of(report)
    assert spent["wall"] > 1.5 and 1.0 <= spent["cpu"] < 1.5, spent


def test_the_backstop_is_the_machines_and_never_the_students_verdict():
    """A job paused past its wall-clock backstop (here 3 times its 1 s) before its code spent its time: the test
    says "wall", and so do the later ones; the judge calls it the machine's (the notebook is graded again,
    never stamped), in one sentence; a record that claims a stop the seconds do not support is the machine's too."""
    from mha_grader.trusted import frames, judging
    limits = sandbox.Limits(test_s=1, notebook_s=5, backstop=3)
    the_job = job(SLEEPS, tests=2)
    report = paused_while(lambda: sandbox.run(the_job, limits), 0.5, 4)
    assert statuses(report) == {"t0": "wall", "t1": "wall"}, report.records
    why = judging._the_machines(frames.events(report.records, the_job), report, limits)
    assert why.startswith("the machine held its job back: t0 was stopped after") and "\n" not in why
    forged = [{"test": "t0", "status": "timeout", "detail": 1,
               "time": {"cpu": 0.1, "own": 0.2, "wall": 9.0, "notebook_cpu": 0.1, "notebook_own": 0.2}}]
    assert judging._the_machines(frames.events(forged, job(SLEEPS)), sandbox.Report(), limits)
    timed_out = sandbox.Report(timed_out=True)
    assert "did not end within" in judging._the_machines({}, timed_out, limits)
