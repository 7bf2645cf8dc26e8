"""Run inside the sandbox by `sandbox.probe()`: test each isolation claim from where student code runs.

Each line: {"check": the claim, "ok": bool, "detail": what was seen, "fix": what to change}. The
grader refuses to grade unless every check is ok (or the instructor passes --unsafe-no-sandbox).
sandbox.probe adds the claims only the outside can see (the job's cgroup, distinct uids). Nothing
here sends a byte off this machine: the network check tries the host's loopback only.
"""
import ctypes
import errno
import json
import os
import resource
import socket
import sys
import time

OUT = int(sys.argv[1])
JOB = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.json")))
LIBC = ctypes.CDLL(None, use_errno=True)
ROOT_FIX = "run the grader as root on Linux (namespaces and mounts are system calls)"
DEFAULTS = "grade with the sandbox's defaults (sandbox.Hardening and sandbox.Limits are weakened)"
MOUNTS = "keep the course, the secret and home folders outside /usr, /lib, /bin and the Python installation"


def report(check: str, ok: bool, detail: str = "", fix: str = ROOT_FIX) -> None:
    os.write(OUT, (json.dumps({"check": check, "ok": bool(ok), "detail": detail, "fix": fix}) + "\n").encode())


def cannot(action) -> tuple[bool, str]:
    try:
        action()
    except OSError as err:
        return True, err.strerror or type(err).__name__
    return False, "it worked"


def read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError as err:
        return f"({err.strerror})"


STATUS = {key: value.strip() for key, _, value in
          (line.partition(":") for line in read("/proc/self/status").splitlines())}
CAPABILITIES = STATUS.get("CapEff", "?")


def user_and_processes() -> None:
    report("unprivileged user", os.getuid() != 0 or JOB["rootless"], f"uid {os.getuid()}")
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    report("own process namespace", len(pids) <= 4, f"{len(pids)} processes visible")
    for name, host in JOB["host_namespaces"].items():
        inside = os.readlink(f"/proc/self/ns/{name}")
        report(f"own {name} namespace", inside != host, f"{inside} (the grader's: {host})")


def files() -> None:
    for path in JOB["private"]:
        ok, why = cannot(lambda p=path: os.listdir(p) if os.path.isdir(p) else open(p).read(1) or
                         (_ for _ in ()).throw(FileNotFoundError(2, "empty")))
        report(f"cannot read {path}", ok or not os.path.exists(path), why, MOUNTS)
    for path in JOB["readonly"]:
        ok, why = cannot(lambda p=path: open(os.path.join(p, ".sandbox-probe"), "w").close())
        report(f"cannot write {path}", ok, why, DEFAULTS)
    report("read-only root", cannot(lambda: open("/.sandbox-probe", "w").close())[0], "/.sandbox-probe", DEFAULTS)
    report("read-only /job", cannot(lambda: open("/job/.sandbox-probe", "w").close())[0]
           and cannot(lambda: open("/job/job.json", "a").close())[0], "/job/.sandbox-probe, /job/job.json", DEFAULTS)
    tmp = os.statvfs("/tmp")
    size = tmp.f_blocks * tmp.f_frsize
    report("/tmp size limit", size <= JOB["tmp_bytes"], f"{size >> 20} MB (at most {JOB['tmp_bytes'] >> 20} MB)",
           DEFAULTS)
    report("scratch folder writable", cannot(lambda: open("/tmp/.probe", "w").write("x"))[0] is False)


def network() -> None:
    ok, why = cannot(lambda: socket.create_connection(("127.0.0.1", JOB["port"]), timeout=2).close())
    report("no network (not even the host's loopback)", ok, why)
    interfaces = sorted(name for _, name in socket.if_nameindex())
    report("no network interface but loopback", interfaces == ["lo"], f"interfaces: {', '.join(interfaces)}")


def privileges_and_limits() -> None:
    status = STATUS
    held = {k: status.get(k, "?") for k in ("CapEff", "CapPrm", "CapBnd")}
    report("no capabilities", all(v.strip("0") == "" for v in held.values()), str(held))
    report("no new privileges", status.get("NoNewPrivs", "").strip() == "1", f"NoNewPrivs {status.get('NoNewPrivs')}")
    memory = resource.getrlimit(resource.RLIMIT_AS)[0]
    total = int(read("/proc/meminfo").split("MemTotal:")[1].split()[0]) * 1024
    report("memory limit per process, at most the machine's memory", 0 < memory <= total,
           f"RLIMIT_AS {memory}, MemTotal {total}", "give the grader a memory limit below the machine's memory")
    size = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    report("file-size limit", size != resource.RLIM_INFINITY and size <= JOB["file_size"], f"RLIMIT_FSIZE {size}",
           DEFAULTS)
    report("process limit", resource.getrlimit(resource.RLIMIT_NPROC)[0] != resource.RLIM_INFINITY, "", DEFAULTS)
    report("seccomp filter loaded", status.get("Seccomp", "").strip() == "2",
           f"Seccomp {status.get('Seccomp', '?').strip()}", "install libseccomp2 and the pinned pyseccomp (make venv)")


def keyring() -> None:
    """Only this job's own, empty keyrings are in view: nothing of the grader's session, nothing an
    earlier job of this uid left."""
    uid, seen, bad = os.getuid(), [], []
    for line in read("/proc/keys").splitlines():
        fields = line.split(None, 8)
        if len(fields) < 9:
            continue
        owner, kind, (name, _, summary) = int(fields[5]), fields[7], fields[8].partition(": ")
        seen.append(f"{kind} {name} of uid {owner}: {summary}")
        own = kind == "keyring" and owner == uid and name in ("_ses", f"_uid.{uid}", f"_uid_ses.{uid}")
        if not own or (name != f"_uid_ses.{uid}" and summary != "empty"):
            bad.append(seen[-1])
    report("private keyring", not bad, "; ".join(bad or seen) or "no keys in view",
           "the grader needs keyctl(2) (kernel keyrings) and the pinned pyseccomp")


def closed_calls() -> None:
    """Each system call the filter closes, tried with zero arguments in a child: ENOSYS from all.
    Only tried without privileges (a privileged process could change the host with some of them)."""
    if os.getuid() == 0 or CAPABILITIES.strip("0"):
        report("closed system calls refused", False, "not tried: the probe runs with privileges")
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        got = {}
        for name, number in JOB["closed"].items():
            result = LIBC.syscall(ctypes.c_long(number), *[ctypes.c_long(0)] * 6)
            if result == 0 and name in ("clone", "clone3"):
                os._exit(0)  # (not refused: this is the new child)
            got[name] = ctypes.get_errno() if result < 0 else 0
        flags = 0x10000000 | 17  # clone(CLONE_NEWUSER | SIGCHLD): a new namespace
        result = LIBC.syscall(ctypes.c_long(JOB["clone"]), ctypes.c_long(flags), *[ctypes.c_long(0)] * 5)
        if result == 0:
            os._exit(0)
        if result > 0:
            os.waitpid(result, 0)
        got["clone with a namespace flag"] = ctypes.get_errno() if result < 0 else 0
        os.write(write_end, json.dumps(got).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        got = json.loads(fh.read() or b"{}")
    os.waitpid(pid, 0)
    open_calls = [f"{name} ({errno.errorcode.get(code, code)})" for name, code in got.items() if code != errno.ENOSYS]
    report("closed system calls refused", got and not open_calls, ", ".join(open_calls) or f"{len(got)} refused",
           "install libseccomp2 and the pinned pyseccomp (make venv)")


def host_paths() -> None:
    """Neither pid 1's command line, nor the mounts, nor the cgroups name a host folder."""
    shown = {"/proc/1/cmdline": read("/proc/1/cmdline").replace("\0", " "),
             "/proc/self/mountinfo": read("/proc/self/mountinfo"), "/proc/self/cgroup": read("/proc/self/cgroup")}
    leaks = [f"{where} shows {path}" for where, text in shown.items() for path in JOB["host_paths"] if path in text]
    groups = [line for line in shown["/proc/self/cgroup"].splitlines() if not line.endswith(":/")]
    report("no host path visible", not leaks and not groups, "; ".join(leaks + groups) or "none shown", DEFAULTS)


def spend() -> None:
    """Memory and CPU in a child of this job, for the outside to find in the job's cgroup."""
    pid = os.fork()
    if pid == 0:
        block = bytearray(JOB["allocate"])  # zeroed: every page touched
        block[::4096] = b"x" * len(block[::4096])
        end = time.process_time() + JOB["spin_s"]
        while time.process_time() < end:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


user_and_processes()
files()
network()
privileges_and_limits()
keyring()
closed_calls()
host_paths()
spend()
report("uid", True, str(os.getuid()))  # (for the outside's check that concurrent jobs differ)
time.sleep(JOB.get("hold_s", 0))
