"""`make probe` from the grader's side: the probe job in two sandboxes at once, then the claims only the
outside can see.

The probe's own program runs inside (inside/probe.py: pid 1 forks a child that becomes the student,
and every check runs there, one check per claim of walls/__init__.py). Here two probe jobs run at once
(their uids must differ), while a server listens on the host's loopback for the job to fail to reach;
then what the job cannot see from inside: its cgroup's caps in force and its usage read back, the
group removed, a distinct uid per concurrent job, no other process holding a sandbox uid. Each claim
that fails comes back as one line: the claim, what was seen, and what to change on the machine.
"""
import os
import socket
import tempfile
import threading
from pathlib import Path

from .sandbox import SLOTS, UID_BASE, Hardening, Limits, prefix_paths, python_prefixes, run

SWEEP_END = 1024  # the probe tries every call number below this that the filter does not admit (x86-64: ~460)
PROBE_CALLS = ("clone", "kill", "tgkill", "rt_sigqueueinfo", "pidfd_open", "pidfd_send_signal", "prlimit64",
               "getpriority", "setpriority", "process_vm_readv", "sched_setaffinity", "setresuid", "setresgid",
               "setgroups", "fcntl", "ioctl", "prctl")  # what the probe calls by number (at pid 1, in refused forms)
FIXES = {  # claim checked outside: what to change on the machine when it fails
    "job cgroup": "run the grader as root with the memory, pids and cpu cgroup controllers mounted "
                  "(cgroup v2, or v1 as on hybrid hosts), or in a delegated cgroup v2 subtree",
    "memory cap": "grade with a memory limit below the machine's memory (sandbox.Limits.memory)",
    "distinct uids": "run the grader as root: each concurrent job gets a uid of its own (62464 and up)",
    "sandbox uids": f"stop the processes named, or give their user another uid: uids {UID_BASE} to "
                    f"{UID_BASE + SLOTS - 1} are the sandbox's alone",
}


def probe(private: list[str], readonly: list[str], unsafe: bool = False, limits: Limits = Limits(notebook_s=20),
          hardening: Hardening = Hardening()) -> list[str]:
    """Test every isolation claim on this machine: the list of claims that fail, each with what was
    seen and what to change (empty: all hold).

    ``private``: paths student code must not read (course, gradebook, secret, home folders);
    ``readonly``: folders it must not write (the interpreter, the packages). Two probe jobs run at
    once (their uids must differ); a server listening on the host's loopback must be unreachable.
    ``limits`` and ``hardening``: the sandbox to probe (the mutation test weakens them).
    """
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        job = _probe_job(private, readonly, server.getsockname()[1], limits)
        reports: list = [None, None]

        def one(n: int) -> None:
            try:
                reports[n] = run(job, limits, unsafe=unsafe, program="probe.py", hardening=hardening)
            except (OSError, RuntimeError) as err:
                reports[n] = err
        threads = [threading.Thread(target=one, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    problems = []
    for report in reports:
        if isinstance(report, Exception):
            return [f"the sandbox could not start: {str(report).strip().rstrip('.') or type(report).__name__}"]
        checks = [r for r in report.records if isinstance(r, dict) and "check" in r]
        if not checks:
            ended = "no exit status came back" if report.returncode is None else f"exit status {report.returncode}"
            said = report.stderr.strip()[:800]
            return [f"the sandbox could not start ({ended})" + (f": {said}" if said else "")]
        problems += [_problem(r["check"], r.get("detail", ""), r.get("fix", "")) for r in checks if not r.get("ok")]
    if not unsafe:
        problems += _outside_checks(reports, job, limits)
    return list(dict.fromkeys(problems))  # (each once: both jobs see the same)


def _probe_job(private: list[str], readonly: list[str], port: int, limits: Limits) -> dict:
    from . import kernel
    course_and_job = [str(Path(p).parent) for p in private] + [tempfile.gettempdir() + "/mha-job-"]
    return {"private": private, "readonly": readonly, "port": port, "rootless": os.geteuid() != 0,
            "host_namespaces": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("mnt", "pid", "net", "ipc", "uts")},
            "tmp_bytes": 64 << 20, "file_size": limits.file_size, "allocate": 48 << 20, "spin_s": 0.1, "hold_s": 0.5,
            "sweep_end": SWEEP_END,  # (what the filter admits is not sent: the probe keeps its own list)
            "names": {n: kernel.syscall_name(n) for n in range(SWEEP_END)}, "getpid": kernel.syscall_number("getpid"),
            "passed_by_the_kernel": kernel.PASSED_BY_THE_KERNEL,
            "numbers": {n: kernel.syscall_number(n) for n in PROBE_CALLS},
            "host_paths": sorted({*course_and_job, *python_prefixes(), *(p for _, ps in prefix_paths() for p in ps)}
                                 - {"/", "/tmp"})}


def _outside_checks(reports: list, job: dict, limits: Limits) -> list[str]:
    """The claims the job cannot see from inside: its cgroup's caps and usage, distinct uids."""
    problems = []
    with open("/proc/meminfo") as fh:
        total = int(fh.read().split("MemTotal:")[1].split()[0]) * 1024
    if not 0 < limits.memory <= total:
        problems.append(_problem("memory cap", f"{limits.memory} bytes, the machine has {total}", FIXES["memory cap"]))
    for report in reports:
        u = report.usage
        want = {"memory_max": limits.memory, "pids_max": limits.processes, "cpus": limits.cpus}
        wrong = [f"{k} {u.get(k)} (want {v})" for k, v in want.items() if u.get(k) != v]
        if not u.get("cgroup") or wrong:
            problems.append(_problem("job cgroup caps in force", "; ".join(wrong) or "no cgroup", FIXES["job cgroup"]))
        elif u.get("memory_peak", 0) < job["allocate"] or u.get("cpu_s", 0) < job["spin_s"] / 2:
            problems.append(_problem("job cgroup counts all the job's processes",
                                     f"peak {u.get('memory_peak')} bytes, {u.get('cpu_s')} CPU s", FIXES["job cgroup"]))
        if u and not u.get("removed"):
            problems.append(_problem("job cgroup removed after the job", str(u), FIXES["job cgroup"]))
    uids = [next((r["detail"] for r in report.records if r.get("check") == "uid"), None) for report in reports]
    if uids[0] == uids[1]:
        problems.append(_problem("a distinct uid per concurrent job", f"both ran as uid {uids[0]}",
                                 FIXES["distinct uids"]))
    if os.geteuid() == 0 and (strangers := holders_of_sandbox_uids()):
        problems.append(_problem("no other process holds a sandbox uid", "; ".join(strangers[:5]),
                                 FIXES["sandbox uids"]))
    return problems


def holders_of_sandbox_uids() -> list[str]:
    """Processes of this machine (of the grader's own PID namespace: every job lives in a namespace of its
    own) whose real, effective, saved or file-system uid or gid is one of the sandbox's: a job would share
    that process's kernel keyrings, limits and signals."""
    mine, found = os.readlink("/proc/self/ns/pid"), []
    sandbox_ids = range(UID_BASE, UID_BASE + SLOTS)
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != mine:
                continue
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue  # it has just ended
        ids = [int(i) for key in ("Uid", "Gid") for i in fields.get(key, "").split()]
        if any(i in sandbox_ids for i in ids):
            found.append(f"pid {name} ({fields.get('Name', '?').strip()}) as uid/gid {fields['Uid'].split()[0]}/"
                         f"{fields['Gid'].split()[0]}")
    return found


def _problem(claim: str, detail: str, fix: str) -> str:
    return f"{claim}: failed ({detail})" + (f"; to fix: {fix}" if fix else "")
