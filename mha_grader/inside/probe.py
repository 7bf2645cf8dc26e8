"""Run inside the sandbox by walls/probing.py: test each isolation claim from where student code runs.

As the harness does, the probe's pid 1 forks a child that becomes the student (as_student.py) and
every check runs there; pid 1 itself only counts the signals that land on it, and says so last.
Each line: {"check": the claim, "ok": bool, "detail": what was seen, "fix": what to change}. The
grader refuses to grade unless every check is ok (or the instructor passes --unsafe-no-sandbox).
walls/probing.py adds the claims only the outside can see (the job's cgroup, distinct uids, no other
process holding a sandbox uid). Nothing here sends a byte off this machine: the network check tries
the host's loopback only.
"""
import ctypes
import errno
import fcntl
import json
import mmap
import os
import resource
import select
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import as_student  # noqa: E402 - copied next to this file into the job folder

OUT = int(sys.argv[1])
JOB = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.json")))
LIBC = ctypes.CDLL(None, use_errno=True)
ROOT_FIX = "run the grader as root on Linux (namespaces and mounts are system calls)"
DEFAULTS = "grade with the sandbox's defaults (sandbox.Hardening and sandbox.Limits are weakened)"
MOUNTS = "keep the course, the secret and home folders outside /usr, /lib, /bin and the Python installation"
FILTER = "install libseccomp2 and the pinned pyseccomp (make venv), and grade with the sandbox's defaults"
LANDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)  # tried on pid 1

# The probe's own reference, written here apart from walls/kernel.py (whose filter it checks) and never read
# from it: the calls a job may make whole, and those it may make in some forms only. Every other call number
# must be refused, and every refusal of the filter answers ENOSYS, which the kernel never answers a call it
# knows (its own refusals, from the uid pid 1 runs under, say EPERM): so a call added to the filter's list, a
# form of a call let through, or a refusal left to the kernel alone is each seen here, by the answer.
MAY_MAKE = """read write pread64 open openat close lseek newfstatat getdents64 readlink getcwd access fstatfs statfs
mkdir rmdir unlink unlinkat rename link chmod sendfile dup2 pipe2 pselect6 brk mmap munmap mprotect madvise wait4
exit exit_group getpid gettid set_robust_list rseq futex pidfd_open capset sched_getaffinity getuid uname
rt_sigaction rt_sigprocmask rt_sigreturn restart_syscall clock_gettime clock_nanosleep getrandom""".split()
IN_SOME_FORMS = """clone kill tgkill prlimit64 sched_setaffinity fcntl ioctl prctl setresuid setresgid setgroups socket
socketpair""".split()  # (each form that must be refused is tried in refused_forms and pid_1_out_of_reach)
FILTER_ANSWER = errno.ENOSYS
NAMESPACES = {"CLONE_NEWNS": 0x20000, "CLONE_NEWUTS": 0x4000000, "CLONE_NEWIPC": 0x8000000, "CLONE_NEWUSER": 0x10000000,
              "CLONE_NEWPID": 0x20000000, "CLONE_NEWNET": 0x40000000, "CLONE_NEWCGROUP": 0x2000000}
# (CLONE_NEWTIME, 0x80, is clone3's and unshare's alone: to clone it is part of the exit signal's byte)
WALL = 0x40000000  # waitpid's __WALL: a child whatever signal it ends with


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


def status(pid: str = "self") -> dict[str, str]:
    lines = read(f"/proc/{pid}/status").splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


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
    interfaces = sorted(line.split(":")[0].strip() for line in read("/proc/net/dev").splitlines()[2:])
    report("no network interface but loopback", interfaces == ["lo"], f"interfaces: {', '.join(interfaces)}")


def privileges_and_limits() -> None:
    status = STATUS  # (as the student)
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
           f"Seccomp {status.get('Seccomp', '?').strip()}", FILTER)


def keyring() -> None:
    """Only this job's own, empty keyrings are in view: nothing of the grader's session, nothing an
    earlier job of this uid left."""
    uid, seen, bad = os.getuid(), [], []
    job_uids = {uid, PID_1_UID}  # (the session keyring is pid 1's, joined fresh before the child was forked)
    for line in read("/proc/keys").splitlines():
        fields = line.split(None, 8)
        if len(fields) < 9:
            continue
        owner, kind, (name, _, summary) = int(fields[5]), fields[7], fields[8].partition(": ")
        seen.append(f"{kind} {name} of uid {owner}: {summary}")
        own = kind == "keyring" and (owner == uid and name in (f"_uid.{uid}", f"_uid_ses.{uid}")
                                     or owner in job_uids and name == "_ses")
        if not own or (name != f"_uid_ses.{uid}" and summary != "empty"):
            bad.append(seen[-1])
    report("private keyring", not bad, "; ".join(bad or seen) or "no keys in view",
           "the grader needs keyctl(2) (kernel keyrings) and the pinned pyseccomp")


def refused_calls() -> None:
    """Every call number outside the probe's own list (:data:`MAY_MAKE`, :data:`IN_SOME_FORMS`: all of
    0..sweep_end but those, named or not), tried with zero arguments: the filter's ENOSYS from each. Tried in
    a disposable child, watched from here: a call that ends it or blocks it (as it would if admitted: pause,
    seccomp...) is named, and the sweep goes on in a new child from the next number."""
    if os.getuid() == 0 or CAPABILITIES.strip("0"):
        report("system calls outside the allowlist refused", False, "not tried: the probe runs with privileges")
        return
    mine = set(MAY_MAKE) | set(IN_SOME_FORMS)
    todo = [n for n in range(JOB["sweep_end"]) if JOB["names"].get(str(n), f"#{n}") not in mine]
    admitted_here = []
    kernel_passes = {int(n): way for n, (_, way) in JOB["passed_by_the_kernel"].items()}  # (no filter sees them)
    while todo:
        results, stopped = _sweep(todo)
        admitted_here += [f"{JOB['names'].get(str(n), f'#{n}')} ({errno.errorcode.get(code, code)})"
                          for n, code in results.items()
                          if code != FILTER_ANSWER and not (n in kernel_passes and  # (a call that worked: 0)
                                                            errno.errorcode.get(code) == kernel_passes[n])]
        todo = todo[len(results):]
        if stopped and todo:  # the call after the last answered one ended or blocked the child
            if stopped != f"it ended the process ({kernel_passes.get(todo[0])})":
                admitted_here.append(f"{JOB['names'].get(str(todo[0]), f'#{todo[0]}')} ({stopped})")
            todo = todo[1:]
    tried = JOB["sweep_end"] - len([n for n in range(JOB["sweep_end"]) if JOB["names"].get(str(n)) in mine])
    report("system calls outside the allowlist refused", not admitted_here,
           ", ".join(admitted_here[:30]) or f"all {tried} refused (ENOSYS)", FILTER)


def refused_forms() -> None:
    """The forms of the calls a job makes in some forms only (:data:`IN_SOME_FORMS`) that it may not make,
    each tried: a namespace flag to clone, another uid or group, another process's limits or CPUs, a file
    lock, lease, owner or signal, a device's or a terminal's ioctl, a prctl a job does not use. Each must get
    the filter's ENOSYS: the kernel's own refusal (EPERM for a uid without the capability, ENOTTY) is not it."""
    numbers, wrong = JOB["numbers"], []

    def call(name: str, *args) -> tuple[int, int]:
        result = LIBC.syscall(ctypes.c_long(numbers[name]), *(a if isinstance(a, ctypes.Array) or a is None
                                                              else ctypes.c_long(a) for a in args))
        return result, (ctypes.get_errno() if result < 0 else 0)

    def expect(what: str, result: tuple[int, int]) -> None:
        if result[1] != FILTER_ANSWER:
            wrong.append(f"{what}: {'it worked' if result[0] >= 0 else errno.errorcode.get(result[1], result[1])}")
    expect("kill(0, 0) (its process group, pid 1's)", call("kill", 0, 0))
    expect("tgkill(1, 1, 0)", call("tgkill", 1, 1, 0))
    for name, flag in NAMESPACES.items():
        result = call("clone", flag | signal.SIGCHLD, 0, 0, 0, 0)
        if result[0] == 0:
            os._exit(0)
        if result[0] > 0:
            os.waitpid(result[0], WALL)
        expect(f"clone({name})", result)
    limit, cpus = (ctypes.c_uint64 * 2)(), (ctypes.c_ulong * 16)(1)
    expect("prlimit64(pid 2, RLIMIT_NOFILE) read", call("prlimit64", 2, resource.RLIMIT_NOFILE, None, limit))
    expect("sched_setaffinity(pid 1)", call("sched_setaffinity", 1, ctypes.sizeof(cpus), cpus))
    me = os.getuid()
    for uid in sorted({0, PID_1_UID, me + 4096, 65534} - {me}):
        expect(f"setresuid({uid})", call("setresuid", uid, uid, uid))
        expect(f"setresgid({uid})", call("setresgid", uid, uid, uid))
    groups = (ctypes.c_uint * 1)(0)
    expect("setgroups([0])", call("setgroups", 1, groups))
    fd = os.open("/tmp/.probe-forms", os.O_RDWR | os.O_CREAT, 0o600)
    read_end, write_end = os.pipe()
    record = ctypes.create_string_buffer(struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 0, 0, 0))
    for command, name in ((fcntl.F_SETOWN, "F_SETOWN"), (fcntl.F_GETOWN, "F_GETOWN"), (fcntl.F_GETLK, "F_GETLK"),
                          (fcntl.F_SETLK, "F_SETLK"), (10, "F_SETSIG"), (fcntl.F_SETLEASE, "F_SETLEASE")):
        expect(f"fcntl({name})", call("fcntl", fd, command, os.getpid() if name == "F_SETOWN" else
                                     fcntl.F_RDLCK if name == "F_SETLEASE" else record))
    for request, name in ((0x541B, "FIONREAD"), (0x5412, "TIOCSTI"), (0x5413, "TIOCGWINSZ")):
        expect(f"ioctl({name})", call("ioctl", read_end, request, record))
    for option, name in ((3, "PR_GET_DUMPABLE"), (16, "PR_GET_NAME"), (23, "PR_CAPBSET_READ"),
                         (0x59616D61, "PR_SET_PTRACER")):
        expect(f"prctl({name})", call("prctl", option, 0 if option != 16 else record, 0, 0, 0))
    for fd_ in (fd, read_end, write_end):
        os.close(fd_)
    os.unlink("/tmp/.probe-forms")
    report("call forms outside the allowlist refused", not wrong, "; ".join(wrong[:20]) or "each refused (ENOSYS)",
           FILTER)


def _sweep(numbers: list[int]) -> tuple[dict[int, int], str]:
    """({number: errno, 0 if it succeeded} for the calls tried in order, why the child stopped early or "")."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        me = os.getpid()
        for number in numbers:
            result = LIBC.syscall(ctypes.c_long(number), *[ctypes.c_long(0)] * 6)
            code = ctypes.get_errno() if result < 0 else 0
            if LIBC.getpid() != me:
                os._exit(0)  # (a new process: a fork-like call was admitted)
            os.write(write_end, b"%d %d\n" % (number, code))
        os._exit(0)
    os.close(write_end)
    results, buffer, why = {}, b"", ""
    while True:
        ready, _, _ = select.select([read_end], [], [], 3.0)
        if not ready:
            why = "it blocked"
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            number, code = map(int, line.split())
            results[number] = code
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if len(results) < len(numbers) and not why:
        why = f"it ended the process ({_ending(status)})"
    return results, why


def _ending(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit status {os.WEXITSTATUS(status)}"


def ended_by(action) -> str:
    """How a child that runs ``action`` ended: "SIGSYS", "SIGSEGV", ... or "" if it returned."""
    pid = os.fork()
    if pid == 0:
        action()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else ""


def foreign_architectures() -> None:
    """A call under x32's numbers and one through the i386 entry (int 0x80): each kills the process that
    makes it (SIGSYS, the filter's bad-architecture action). A kernel without the i386 entry faults
    (SIGSEGV) before any filter is asked: that entry is closed too."""
    x32 = ended_by(lambda: LIBC.syscall(ctypes.c_long(0x40000000 | JOB["getpid"])))
    code = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20 (i386 getpid); int 0x80; ret
    i386 = ended_by(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code))))
    report("calls of another architecture kill the job", x32 == "SIGSYS" and i386 in ("SIGSYS", "SIGSEGV"),
           f"x32 getpid: {x32 or 'it returned'}; i386 getpid (int 0x80): {i386 or 'it returned'}", FILTER)


def sockets() -> None:
    """No socket of any family opens (a job needs none: AF_VSOCK, netlink, the network, AF_UNIX)."""
    opened = []
    for family in range(1, 64):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
            fd = LIBC.socket(family, kind, 0)
            if fd >= 0:
                os.close(fd)
                opened.append(_family(family))
                break
    report("no socket opens, of any family", not opened, ", ".join(opened) or "none opened", FILTER)


def _family(number: int) -> str:
    try:
        return socket.AddressFamily(number).name
    except ValueError:
        return f"family {number}"


def pid_1_out_of_reach() -> None:
    """Nothing the student's code runs reaches pid 1: another uid, and no signal, limit, trace or OOM
    score of it can be changed (each tried without changing anything if it worked)."""
    if not JOB["rootless"]:
        report("pid 1 under another uid than the student's code", PID_1_UID != os.getuid(),
               f"pid 1: uid {PID_1_UID}; the student's: {os.getuid()}", DEFAULTS)
    numbers, reached, answered = JOB["numbers"], [], []

    def attempt(what: str, result: int) -> None:
        if result >= 0:
            reached.append(what)
        elif ctypes.get_errno() != FILTER_ANSWER:
            answered.append(f"{what}: {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}")

    def call(name: str, *args) -> int:
        return LIBC.syscall(ctypes.c_long(numbers[name]), *(a if isinstance(a, ctypes.Array) or a is None
                                                            else ctypes.c_long(a) for a in args))
    for sig in LANDING:
        attempt(f"kill(1, {sig.name})", call("kill", 1, sig))
        attempt(f"tgkill(1, 1, {sig.name})", call("tgkill", 1, 1, sig))
    info = (ctypes.c_int * 32)(int(signal.SIGUSR1), 0, -1)  # siginfo: SIGUSR1, SI_QUEUE
    attempt("rt_sigqueueinfo(1, SIGUSR1)", call("rt_sigqueueinfo", 1, signal.SIGUSR1, info))
    pidfd = call("pidfd_open", 1, 0)
    if pidfd >= 0:
        attempt("pidfd_send_signal(pid 1, SIGUSR1)", call("pidfd_send_signal", pidfd, signal.SIGUSR1, None, 0))
        os.close(pidfd)
    limit = (ctypes.c_uint64 * 2)()
    attempt("prlimit64(1, RLIMIT_NOFILE) read", call("prlimit64", 1, resource.RLIMIT_NOFILE, None, limit))
    if reached[-1:] == ["prlimit64(1, RLIMIT_NOFILE) read"]:  # (set it to what it is)
        attempt("prlimit64(1, RLIMIT_NOFILE) set", call("prlimit64", 1, resource.RLIMIT_NOFILE, limit, None))
    niceness = call("getpriority", 0, 1)  # (the raw call answers 20 - nice; reading it reaches nothing)
    if niceness < 0:
        attempt("getpriority(pid 1)", niceness)
    if niceness > 0:
        attempt("setpriority(pid 1)", call("setpriority", 0, 1, 20 - niceness))  # (to the value it has)
    buffer = ctypes.create_string_buffer(8)
    local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 8)
    remote = (ctypes.c_void_p * 2)(id(None), 8)  # (an address mapped in pid 1 too: a copy of this process)
    attempt("process_vm_readv(pid 1)", call("process_vm_readv", 1, local, 1, remote, 1, 0))
    for path, mode in (("/proc/1/mem", os.O_RDONLY), ("/proc/1/oom_score_adj", os.O_WRONLY)):
        try:
            os.close(os.open(path, mode))
            reached.append(f"open {path}")
        except OSError:
            pass
    report("no signal, limit, trace or OOM score of pid 1 within reach", not reached,
           ", ".join(reached) or "each refused", DEFAULTS)
    if STATUS.get("Seccomp", "").strip() == "2":  # (the filter's own claim: each of those refused by it)
        report("the filter refuses every call aimed at pid 1 (ENOSYS)", not answered,
               "; ".join(answered[:12]) + " (the kernel's answer, not the filter's)" if answered else
               "each refused by the filter", FILTER)


def shared_files() -> None:
    """No lock or watch on a file of the host's /usr (seen by the host and by every other job): flock,
    record locks (classic and open-file), a lease, directory notification, inotify, fanotify."""
    usr_file = next((e.path for e in os.scandir("/usr/bin") if e.is_file(follow_symlinks=False)), "/usr/bin/env")
    fd, folder = os.open(usr_file, os.O_RDONLY), os.open("/usr/bin", os.O_RDONLY | os.O_DIRECTORY)
    worked = []
    record = struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 0, 0, 0)  # struct flock: read lock of the whole file
    tries = {"flock": lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB),
             "F_SETLK": lambda: fcntl.fcntl(fd, fcntl.F_SETLK, record),
             "F_OFD_SETLK": lambda: fcntl.fcntl(fd, fcntl.F_OFD_SETLK, record),
             "F_SETLEASE": lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK),
             "F_NOTIFY": lambda: fcntl.fcntl(folder, fcntl.F_NOTIFY, fcntl.DN_ACCESS),
             "inotify": lambda: _watch(LIBC.inotify_init1(0), folder),
             "fanotify": lambda: _checked(LIBC.fanotify_init(0x200, 0))}  # FAN_REPORT_FID: the unprivileged form
    for name, action in tries.items():
        try:
            action()
            worked.append(name)
        except OSError:
            pass
    os.close(fd)
    os.close(folder)
    report("no lock or watch on the host's files", not worked, ", ".join(worked) or f"each refused ({usr_file})",
           FILTER)


def _checked(fd: int) -> int:
    if fd < 0:
        raise OSError(ctypes.get_errno(), "refused")
    os.close(fd)
    return fd


def _watch(fd: int, folder: int) -> None:
    if fd < 0:
        raise OSError(ctypes.get_errno(), "refused")
    try:
        if LIBC.inotify_add_watch(fd, f"/proc/self/fd/{folder}".encode(), 1) < 0:  # IN_ACCESS
            raise OSError(ctypes.get_errno(), "refused")
    finally:
        os.close(fd)


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


def as_the_student() -> None:
    """Every check, from where student code runs: a child of pid 1 that became the student."""
    global STATUS, CAPABILITIES
    as_student.become(JOB["student"])
    STATUS = status()
    CAPABILITIES = STATUS.get("CapEff", "?")
    for check in (user_and_processes, files, network, privileges_and_limits, keyring, refused_calls, refused_forms,
                  foreign_architectures, sockets, pid_1_out_of_reach, shared_files, host_paths, spend):
        try:
            check()
        except Exception as err:  # noqa: BLE001 - a check that cannot run fails its claim, and the others still run
            report(check.__name__.replace("_", " "), False, f"the check raised {type(err).__name__}: {err}"[:200])
    report("uid", True, str(os.getuid()))  # (for the outside's check that concurrent jobs differ)


LANDED: list[str] = []
PID_1_UID = int(status("1").get("Uid", "-1").split()[0])
STATUS, CAPABILITIES = {}, "?"
if __name__ == "__main__":
    for number in LANDING:
        signal.signal(number, lambda n, _: LANDED.append(signal.Signals(n).name))
    student = os.fork()
    if student == 0:
        try:
            as_the_student()
        finally:
            os._exit(0)
    os.waitpid(student, 0)
    report("no signal from the student's code lands on pid 1", not LANDED, ", ".join(LANDED) or "none landed",
           DEFAULTS)
    time.sleep(JOB.get("hold_s", 0))
